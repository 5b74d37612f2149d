"""Facts about the machine a worker runs on, for ``RunStarted.env``.

The CPU facts come from ``accelctl.hostinfo`` (torch-free, shared with the planner and
``doctor``).  ``collect`` reads library versions from package metadata, so it never
imports transformers, timm or diffusers by itself.

``add_ceiling`` puts the matmul ceiling MFU is measured against into the env: the one
``accelctl doctor --calibrate`` stored for this device and thread count
(``accelctl.contract.calibration``, shown with its date) when there is one, else a short
per-run probe (best-of, biased up; the env says which), and none at all for a task that
reports no MFU (greedy generation).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
from collections.abc import Callable
from typing import Any

from accelctl.contract import calibration
from accelctl.hostinfo import cpu_bf16_flags, cpu_has_native_bf16, cpu_model

LIBRARIES = ("torch", "transformers", "timm", "diffusers", "accelerate", "deepspeed", "datasets")


def library_versions() -> dict[str, str]:
    """Installed versions from package metadata (no import of the libraries)."""
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def collect(threads: int, device_name: str = "cpu") -> dict[str, Any]:
    """Everything ``RunStarted.env`` carries, except the measured peak (added by the loop)."""
    env: dict[str, Any] = library_versions()
    env.update({
        "python_executable": sys.executable,
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_bf16_flags": cpu_bf16_flags(),
        "cpu_has_native_bf16": cpu_has_native_bf16(),
        "threads": threads,
        "device_name": device_name,
    })
    return env


def add_ceiling(env: dict[str, Any], dtype: str, probe: Callable[[], float], wanted: bool) -> None:
    """Set ``peak_flops_measured`` (FLOP/s) and ``peak_flops_source`` in ``env`` (which
    already holds ``device_name`` and ``threads``) for a run computing in ``dtype``
    (``float32``, ``bfloat16`` ...).  ``probe`` runs only when no calibration is stored."""
    if not wanted:
        env["peak_flops_source"] = "none: this task reports no MFU"
        return
    stored = calibration.lookup(env["device_name"], env["threads"])
    ceiling = stored.ceiling(dtype) if stored else None
    if stored and ceiling:
        env["peak_flops_measured"], env["peak_flops_dtype"] = ceiling
        env["peak_flops_source"] = f"calibration {stored.date} ({stored.method})"
        env["peak_flops_date"] = stored.date
        return
    env["peak_flops_measured"] = probe()
    env["peak_flops_source"] = "per-run probe (best-of, biased up; run accelctl doctor --calibrate)"

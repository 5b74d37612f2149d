"""Facts about the machine a worker runs on, for ``RunStarted.env``.

The CPU facts come from ``accelctl.hostinfo`` (torch-free, shared with the planner and
``doctor``).  ``collect`` reads library versions from package metadata, so it never
imports transformers, timm or diffusers by itself.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
from typing import Any

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

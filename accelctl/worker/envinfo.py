"""Facts about the machine a worker runs on, for ``RunStarted.env``.

``cpu_has_native_bf16`` imports nothing heavy: the planner calls it to warn that a
bf16 workload on a CPU without AVX512-BF16/AMX is emulated (~100-180x slower than
fp32 on the 2-core EPYC of LAB.md).  ``collect`` reads library versions from package
metadata, so it never imports transformers, timm or diffusers by itself.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
from functools import lru_cache
from typing import Any

#: CPU flags (as /proc/cpuinfo spells them) that give native bf16 matmuls
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
FP16_FLAGS = ("avx512_fp16", "amx_fp16")

LIBRARIES = ("torch", "transformers", "timm", "diffusers", "accelerate", "deepspeed", "datasets")


@lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first CPU in /proc/cpuinfo; ("", {}) where unreadable."""
    name, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not name:
                    name = value.strip()
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
                if name and flags:
                    break
    except OSError:
        pass
    return name or platform.processor() or platform.machine(), flags


def cpu_model() -> str:
    return _cpuinfo()[0]


def cpu_bf16_flags() -> list[str]:
    """The bf16-relevant flags this CPU has (empty on AVX2-only machines)."""
    flags = _cpuinfo()[1]
    return [f for f in BF16_FLAGS if f in flags]


def cpu_has_native_bf16() -> bool:
    """True when the CPU executes bf16 matmuls natively (AVX512-BF16 or AMX).

    Without them torch emulates bf16 and a matmul is ~180x slower than fp32 here.
    Deliberately torch-free so the planner can call it.
    """
    return bool(cpu_bf16_flags())


def cpu_has_native_fp16() -> bool:
    """True when the CPU has fp16 matmul instructions (AVX512-FP16 or AMX-FP16); torch-free."""
    return any(f in _cpuinfo()[1] for f in FP16_FLAGS)


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

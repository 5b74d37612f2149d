"""What a bench report says about the machine it ran on (read from /proc, no accelctl import
needed): CPU model, the ISA flags that decide matmul speed, cores, load."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path

FLAGS_OF_INTEREST = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def cpuinfo() -> tuple[str, list[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown", []
    model, flags = "unknown", []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = value.split()
    return model, [f for f in FLAGS_OF_INTEREST if f in flags]


def host() -> dict:
    model, flags = cpuinfo()
    versions = {}
    for name in ("torch", "transformers", "timm", "deepspeed", "accelerate"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"cpu_model": model, "cpu_flags": flags, "cores": os.cpu_count(), "python": platform.python_version(),
            "versions": versions, "loadavg_start": list(os.getloadavg())}

"""Facts about this machine, found without importing any framework.

Device files and tools on PATH (``first_sign``: the device families say which ones mean
what, ``accelctl.contract.devices``), used to pick a default target (``accelctl run``
without ``--target``); ``accelctl doctor`` goes further and imports the stacks that are
installed.  The CPU facts (model, native bf16/fp16) are torch-free so the planner,
``doctor`` and the worker share them: bf16 on a CPU without AVX512-BF16/AMX is emulated
(~100-180x slower than fp32 on the 2-core EPYC of LAB.md).
"""

from __future__ import annotations

import glob
import os
import platform
import shutil
from functools import lru_cache


def first_sign(device_files: tuple[str, ...] = (), tools: tuple[str, ...] = ()) -> str | None:
    """The first device file (glob pattern) that exists, else "<tool> on PATH" for the first
    tool found, else None.  Which files and tools mean which device family is the family
    table's knowledge (``accelctl.contract.devices``), not this module's."""
    for pattern in device_files:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    for tool in tools:
        if shutil.which(tool):
            return f"{tool} on PATH"
    return None


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


#: CPU flags (as /proc/cpuinfo spells them) that give native bf16 matmuls
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
FP16_FLAGS = ("avx512_fp16", "amx_fp16")


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


# --------------------------------------------------------------------------- 16-bit on a CPU

#: the advice wherever bf16/fp16 meets a CPU: the checker's W601, the plan, the worker
CPU_16BIT_HINT = ("CPUs without native bf16/fp16 instructions (AVX512-BF16/AMX, AVX512-FP16; AVX2-only CPUs "
                  "have none) emulate them ~100-180x slower than fp32; set precision = fp32 on cpu targets")


def cpu_has_native(dtype: str) -> bool:
    """Whether this CPU computes ``dtype`` natively: bf16 and fp16 need their instructions
    (``cpu_has_native_bf16`` / ``cpu_has_native_fp16``), anything else is not emulated."""
    if dtype == "bf16":
        return cpu_has_native_bf16()
    if dtype == "fp16":
        return cpu_has_native_fp16()
    return True


def cpu_precision_warning(dtype: str, native: bool | None = None) -> str | None:
    """The one warning for 16-bit precision on a CPU that emulates it (~100-180x slower
    than fp32 on the AVX2 EPYC of LAB.md), or None: fp32, or a CPU with the instructions.
    ``native`` defaults to this CPU's (``cpu_has_native``)."""
    if dtype not in ("bf16", "fp16"):
        return None
    if native is None:
        native = cpu_has_native(dtype)
    if native:
        return None
    return (f"{dtype} on a CPU without native {dtype} instructions: matmuls are emulated, ~100-180x slower "
            f"than fp32, and the timings will not represent {dtype} hardware; use precision = fp32 on cpu targets")


def in_hf_cache(ref: str, family: str) -> bool:
    """Whether the Hub model ``ref`` is in this machine's Hugging Face cache (``HF_HUB_CACHE``,
    else ``HF_HOME``/hub, else the default), read at call time: huggingface_hub reads the
    variables once, when it is first imported."""
    from huggingface_hub import try_to_load_from_cache

    cache = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None)
    marker = "model_index.json" if family == "stable_diffusion" else "config.json"
    return isinstance(try_to_load_from_cache(ref, marker, cache_dir=cache), str)

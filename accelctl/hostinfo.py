"""Facts about this machine, found without importing any framework.

Device files and tools on PATH (``first_sign``: the device families say which ones mean
what, ``accelctl.families``), used to pick a default target (``accelctl run``
without ``--target``); ``accelctl doctor`` goes further and imports the stacks that are
installed.  The CPU facts (model, native bf16/fp16) are torch-free so the planner,
``doctor`` and the worker share them.  Whether 16-bit precision is slow on a CPU is decided
by detection and measurement, never by a figure written here: the CPU's flags (bf16 needs
AVX512-BF16 or AMX-BF16; without them torch emulates it), overridden by the bf16/fp32 ratio
``accelctl doctor --calibrate`` measured on this CPU where one is stored (callers pass it:
``cpu_precision_warning(measured=...)``).  A bf16 matmul ran 6.4x *faster* than fp32 on the
AMX Xeon of LAB.md and ~180x slower on the AVX2-only EPYC: no one figure fits every CPU.
"""

from __future__ import annotations

import glob
import os
import shutil
from functools import lru_cache
from pathlib import Path


def first_sign(device_files: tuple[str, ...] = (), tools: tuple[str, ...] = ()) -> str | None:
    """The first device file (glob pattern) that exists, else "<tool> on PATH" for the first
    tool found, else None.  Which files and tools mean which device family is the family
    table's knowledge (``accelctl.families``), not this module's."""
    for pattern in device_files:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    for tool in tools:
        if shutil.which(tool):
            return f"{tool} on PATH"
    return None


def cache_dir() -> Path:
    """accelctl's folder in the user's cache: ``$XDG_CACHE_HOME/accelctl``, else
    ``~/.cache/accelctl`` (parsed workloads, the matmul calibration; read back only where only this
    user can write: ``accelctl.private_files``)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "accelctl"


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def memory_available_bytes() -> int:
    """MemAvailable of /proc/meminfo, in bytes (0 where unreadable).  Read here, not through
    psutil: validate and estimate would import psutil for this one line at every cold start."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


#: CPU flags (as /proc/cpuinfo spells them) that give native bf16 matmuls
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
FP16_FLAGS = ("avx512_fp16", "amx_fp16")


def cpu_flags(flags: str | None = None) -> frozenset[str]:
    """The CPU's flags: ``flags`` (a /proc/cpuinfo ``flags`` value, for a caller or test that
    names another CPU) or this CPU's."""
    return frozenset(flags.split()) if flags is not None else _cpuinfo()[1]


@lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first CPU in /proc/cpuinfo; ("", {}) where unreadable (psutil
    gives neither)."""
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
    if name:
        return name, flags
    import platform  # only where /proc/cpuinfo names no CPU: 1.4 ms of every cold start otherwise

    return platform.processor() or platform.machine(), flags


def cpu_model() -> str:
    return _cpuinfo()[0]


def cpu_bf16_flags(flags: str | None = None) -> list[str]:
    """The bf16-relevant flags the CPU has (empty on AVX2-only machines)."""
    have = cpu_flags(flags)
    return [f for f in BF16_FLAGS if f in have]


def cpu_has_native_bf16(flags: str | None = None) -> bool:
    """True when the CPU executes bf16 matmuls natively (AVX512-BF16 or AMX-BF16); without
    them torch emulates bf16.  Deliberately torch-free so the planner can call it."""
    return bool(cpu_bf16_flags(flags))


def cpu_has_native_fp16(flags: str | None = None) -> bool:
    """True when the CPU has fp16 matmul instructions (AVX512-FP16 or AMX-FP16); torch-free."""
    return any(f in cpu_flags(flags) for f in FP16_FLAGS)


# --------------------------------------------------------------------------- 16-bit on a CPU

#: the advice wherever bf16/fp16 meets a CPU: the checker's W601, the plan, the worker
CPU_16BIT_HINT = ("CPUs without native bf16/fp16 instructions (AVX512-BF16/AMX-BF16, AVX512-FP16/AMX-FP16; "
                  "AVX2-only CPUs have none) emulate them, far slower than fp32; `accelctl plan` says whether the "
                  "CPU it plans on has them, and `accelctl doctor --calibrate` measures bf16 against fp32 there")

#: the flags that make each 16-bit dtype native
NATIVE_FLAGS = {"bf16": BF16_FLAGS, "fp16": FP16_FLAGS}


def cpu_has_native(dtype: str, flags: str | None = None) -> bool:
    """Whether the CPU (this one, or the one ``flags`` describes) computes ``dtype`` natively:
    bf16 and fp16 need their instructions, anything else is not emulated."""
    if dtype == "bf16":
        return cpu_has_native_bf16(flags)
    if dtype == "fp16":
        return cpu_has_native_fp16(flags)
    return True


def cpu_precision_warning(dtype: str, native: bool | None = None, *, flags: str | None = None,
                          measured: tuple[float, str] | None = None) -> str | None:
    """The one warning for 16-bit precision that is slow on a CPU, or None.

    ``measured``: (``dtype``'s matmul FLOP/s over fp32's, where that was measured) -- the
    stored calibration of this CPU (``accelctl.contract.calibration.speed_vs_fp32``).  When
    given it decides: below 1 warns with the figure, 1 or more is no warning.  Without it
    the CPU's flags decide (``native``, else ``cpu_has_native(dtype, flags)``): emulated
    warns, native does not.  fp32 (and anything not 16-bit) never warns."""
    if dtype not in ("bf16", "fp16"):
        return None
    if measured is not None:
        ratio, source = measured
        if ratio >= 1:
            return None
        return (f"{dtype} on this CPU: matmuls measured at {ratio:.3g}x fp32's FLOP/s ({source}), slower than "
                f"fp32; use precision = fp32 on cpu targets")
    if native is None:
        native = cpu_has_native(dtype, flags)
    if native:
        return None
    return (f"{dtype} on a CPU without native {dtype} instructions ({' or '.join(NATIVE_FLAGS[dtype])} not in its "
            f"flags): matmuls are emulated, slower than fp32 (`accelctl doctor --calibrate` measures by how much), "
            f"and the timings will not represent {dtype} hardware; use precision = fp32 on cpu targets")


def cpu_precision_advice(dtype: str, *, flags: str | None = None, measured: tuple[float, str] | None = None) -> str:
    """One line on ``dtype`` on this CPU for ``accelctl doctor``: the warning where it is slow
    (``cpu_precision_warning``), else what says it is not -- the measurement, or the flags."""
    slow = cpu_precision_warning(dtype, flags=flags, measured=measured)
    if slow is not None:
        return slow
    if measured is not None:
        return f"{dtype} matmuls measured at {measured[0]:.3g}x fp32's FLOP/s ({measured[1]}): use it"
    have = [f for f in NATIVE_FLAGS.get(dtype, ()) if f in cpu_flags(flags)]
    return (f"{dtype} native ({', '.join(have)} in the CPU flags); not measured against fp32 here "
            f"(accelctl doctor --calibrate)")


def in_hf_cache(ref: str, family: str) -> bool:
    """Whether the Hub model ``ref`` is in this machine's Hugging Face cache (``HF_HUB_CACHE``,
    else ``HF_HOME``/hub, else the default), read at call time: huggingface_hub reads the
    variables once, when it is first imported."""
    from huggingface_hub import try_to_load_from_cache

    cache = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None)
    marker = "model_index.json" if family == "stable_diffusion" else "config.json"
    return isinstance(try_to_load_from_cache(ref, marker, cache_dir=cache), str)

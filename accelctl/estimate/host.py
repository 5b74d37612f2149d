"""A datasheet for the host CPU (the ``cpu`` device), which the catalog cannot hold: the
machine is whatever runs accelctl.

Peak: the matmul ceiling ``accelctl doctor --calibrate`` stored for this thread count, else the
nominal ``threads x clock x FLOP/cycle`` from /proc/cpuinfo: 32 fp32 FLOP/cycle with AVX2 + FMA
or AVX-512 (Intel's optimization manual, Skylake-SP and later), 8 without.  Bandwidth:
``STREAM_PER_THREAD`` (ASSUMPTION, after McCalpin's STREAM triad results).  These nominal
figures are what ``accelctl estimate --calibrate`` corrects from runs on this CPU.
"""

from __future__ import annotations

from functools import lru_cache

from accelctl import hostinfo
from accelctl.catalog import Datasheet, Figure

_DATE = "2026-11"
STREAM_PER_THREAD = 10e9


@lru_cache(maxsize=1)
def _clock_hz() -> float:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "cpu MHz":
                    return float(value) * 1e6
    except (OSError, ValueError):
        pass
    return 2.0e9


def _measured(threads: int) -> Figure | None:
    from accelctl.contract import calibration

    c = calibration.lookup(hostinfo.cpu_model(), threads)  # this CPU's: not one stored on another (a shared cache)
    if c is None or not c.flops.get("float32"):
        return None
    return Figure(float(c.flops["float32"]), f"measured by accelctl doctor --calibrate on {c.device} "
                                             f"({c.method or 'matmul ceiling'})", c.date[:7])


def datasheet(threads: int) -> Datasheet:
    """This CPU's figures for a process of ``threads`` threads: threads past its logical cores
    add no FLOPs or bandwidth (they share those cores), so the figure counts the cores."""
    threads = max(1, min(threads, hostinfo.cpu_count()))
    peak = _measured(threads)
    if peak is None:
        flags = hostinfo.cpu_flags()
        per_cycle = 32 if ("fma" in flags and ("avx2" in flags or "avx512f" in flags)) else 8
        clock = _clock_hz()
        peak = Figure(threads * clock * per_cycle,
                      f"ASSUMPTION: nominal {threads} thread(s) x {clock / 1e9:.2g} GHz x {per_cycle} fp32 FLOP/cycle "
                      f"({hostinfo.cpu_model()}, /proc/cpuinfo)", _DATE)
    bw = Figure(threads * STREAM_PER_THREAD, "ASSUMPTION: 10 GB/s per thread (one core's STREAM triad on a server "
                "Xeon, McCalpin's STREAM results)", _DATE)
    return Datasheet("cpu", {"fp32": peak, "bf16": peak, "fp16": peak}, bw, bw)

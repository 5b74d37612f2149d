"""``accelctl doctor``: what this machine can run, probed without crashing.

Each stack is probed in its own short-lived interpreter, so a stack that aborts on
import (a CUDA build without a GPU, a half-installed vendor plugin) cannot take the
doctor down; a probe reports what it found or the exact error.  Which probes run is the
plug-ins' knowledge: each device family names the probes of its stack
(``accelctl.contract.devices``), each backend carries its tool's (``Backend.probes``).

``accelctl doctor --calibrate`` measures the CPU's matmul ceiling once per thread count
(``accelctl.worker.calibrate``, one interpreter per thread count, one after the other so
they do not share the cores) and stores it (``accelctl.contract.calibration``); the
worker's MFU is then measured against it instead of a per-run probe.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from accelctl.contract.devices import FAMILIES, PROBES, present_adapters
from accelctl.hostinfo import cpu_count


def all_probes() -> dict[str, str]:
    """Probe name -> code: the probes each device family names, then each backend's own
    (DeepSpeed, Transformer Engine), once each, in family then registry order."""
    from accelctl.plan.registry import BACKENDS

    out: dict[str, str] = {}
    for family in FAMILIES.values():
        for name in family.probes:
            out.setdefault(name, PROBES[name])
    for backend in BACKENDS.values():
        for name, code in backend.probes.items():
            out.setdefault(name, code)
    return out


@dataclass(frozen=True)
class Probe:
    name: str
    ok: bool
    facts: dict
    error: str = ""


def run_probe(name: str, code: str, timeout: float = 60.0) -> Probe:
    try:
        cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Probe(name, False, {}, f"timed out after {timeout:.0f} s")
    if cp.returncode == 0:
        try:
            return Probe(name, True, json.loads(cp.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            return Probe(name, False, {}, "probe printed no result")
    lines = [x for x in cp.stderr.strip().splitlines() if x.strip()]
    last = lines[-1] if lines else f"exit code {cp.returncode}"
    return Probe(name, False, {}, last if len(last) <= 160 else last[:157] + "...")


def host_facts() -> dict:
    from accelctl.contract.calibration import speed_vs_fp32
    from accelctl.hostinfo import cpu_bf16_flags, cpu_has_native_bf16, cpu_model, cpu_precision_advice

    # bf16 advice from detection (the flags) and, where stored, the calibration's bf16/fp32
    # ratio at one thread (the shipped cpu targets' count)
    return {"cpu": cpu_model(), "cores": cpu_count(), "native_bf16": cpu_has_native_bf16(),
            "bf16_flags": cpu_bf16_flags(),
            "bf16_advice": cpu_precision_advice("bf16", measured=speed_vs_fp32("bf16", cpu_model(), 1)),
            "adapters_present": present_adapters(), "cxx_compiler": cxx_compiler()}


def cxx_compiler() -> str:
    """The C++ compiler inductor would call for ``optimize { compile = on }`` on the CPU
    (``$CXX``, else g++, else clang++), as a path; "" when there is none."""
    import os
    import shutil

    for name in (os.environ.get("CXX", ""), "g++", "clang++"):
        found = shutil.which(name) if name else None
        if found:
            return found
    return ""


def doctor(names: list[str] | None = None) -> tuple[dict, list[Probe]]:
    from concurrent.futures import ThreadPoolExecutor

    table = all_probes()
    names = names or list(table)
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        probes = list(pool.map(lambda n: run_probe(n, table[n]), names))
    return host_facts(), probes


def calibrate(threads: list[int], seconds: float = 2.0, n: int = 2048, timeout: float = 300.0):
    """Measure and store the matmul ceiling for each thread count; the stored entries."""
    from accelctl.contract import calibration

    stored = []
    for count in threads:
        cmd = [sys.executable, "-m", "accelctl.worker.calibrate", "--threads", str(count), "--n", str(n),
               "--seconds", str(seconds)]
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if cp.returncode != 0:
            lines = [x for x in cp.stderr.strip().splitlines() if x.strip()]
            raise RuntimeError(f"calibration with {count} thread(s) failed: {lines[-1] if lines else cp.returncode}")
        entry = calibration.Calibration(**json.loads(cp.stdout.strip().splitlines()[-1]))
        calibration.store(entry)
        stored.append(entry)
    return stored


def stored_calibrations() -> list:
    """This CPU's stored ceilings (every thread count), oldest thread count first."""
    from accelctl.contract import calibration
    from accelctl.hostinfo import cpu_model

    model = cpu_model()
    return sorted((c for c in calibration.load_all().values() if c.device == model), key=lambda c: c.threads)


def describe_calibration(c) -> str:
    parts = [f"{name} {flops / 1e9:.1f} GFLOP/s" for name, flops in c.flops.items()]
    fp32, bf16 = c.flops.get("float32"), c.flops.get("bfloat16")
    if fp32 and bf16:
        parts.append(f"bf16/fp32 {bf16 / fp32:.2f}x")
    return f"threads={c.threads}: " + ", ".join(parts) + f"  (measured {c.date}; {c.method})"

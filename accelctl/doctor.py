"""``accelctl doctor``: what this machine can run, probed without crashing.

Each stack is probed in its own short-lived interpreter, so a stack that aborts on
import (a CUDA build without a GPU, a half-installed vendor plugin) cannot take the
doctor down; a probe reports what it found or the exact error.  Which probes run is the
plug-ins' knowledge: each device family names the probes of its stack
(``accelctl.contract.devices``), each backend carries its tool's (``Backend.probes``).
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
    from accelctl.hostinfo import cpu_has_native_bf16, cpu_model

    return {"cpu": cpu_model(), "cores": cpu_count(), "native_bf16": cpu_has_native_bf16(),
            "adapters_present": present_adapters()}


def doctor(names: list[str] | None = None) -> tuple[dict, list[Probe]]:
    from concurrent.futures import ThreadPoolExecutor

    table = all_probes()
    names = names or list(table)
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        probes = list(pool.map(lambda n: run_probe(n, table[n]), names))
    return host_facts(), probes

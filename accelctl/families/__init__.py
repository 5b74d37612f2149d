"""Device families, one module each (``cpu``, ``cuda``, ``rocm``, ``hpu``, ``xla``): the registry below is
the one place a family is listed.  A module holds its ``FAMILY`` row (``accelctl.families.row``)
and its ``accelctl doctor`` probes; the planner resolves a target's family into the job
(``WorkerJob.device``), so the worker never maps device kinds itself."""

from __future__ import annotations

from accelctl.families import cpu, cuda, hpu, rocm, xla
from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

#: every family, in the order detection and ``accelctl doctor`` go through them
MODULES = (cpu, cuda, rocm, hpu, xla)

FAMILIES: dict[str, DeviceFamily] = {m.FAMILY.name: m.FAMILY for m in MODULES}

#: ``accelctl doctor``'s probes of the device stacks, by name (a family names those it needs)
PROBES: dict[str, str] = {name: code for m in MODULES for name, code in m.PROBES.items()}

__all__ = ["FAMILIES", "MODULES", "PROBES", "WORKER_DEVICES", "Detection", "DeviceFamily", "present_adapters"]


def present_adapters() -> dict[str, str]:
    """Device families present here -> how we know (always includes the host's)."""
    found = {}
    for fam in FAMILIES.values():
        sign = fam.detect.found()
        if sign is not None:
            found[fam.name] = sign
    return found

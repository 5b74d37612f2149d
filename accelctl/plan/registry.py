"""The registry of backends: the one place that chooses a backend for a target."""

from __future__ import annotations

from accelctl.backends.base import Backend
from accelctl.backends.cpu import CpuBackend
from accelctl.backends.torchrun import TorchrunBackend
from accelctl.spec.types import TargetSpec, WorkloadSpec

#: in selection order: the first that selects a target wins
BACKENDS: dict[str, Backend] = {b.name: b for b in (CpuBackend(), TorchrunBackend())}


def choose(spec: WorkloadSpec, target: TargetSpec) -> tuple[Backend | None, list[str]]:
    """The backend for a target, or None with the reasons none fits."""
    if target.backend:
        b = BACKENDS.get(target.backend)
        if b is None:
            return None, [f"backend {target.backend} is not available in this version of accelctl"]
        why = b.unsupported(spec, target)
        return (None, why) if why else (b, [])
    for b in BACKENDS.values():
        if b.selects(spec, target) and not b.unsupported(spec, target):
            return b, []
    reasons = [f"{b.name}: {'; '.join(b.unsupported(spec, target)) or 'not selected'}" for b in BACKENDS.values()]
    return None, reasons

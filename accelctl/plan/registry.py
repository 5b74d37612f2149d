"""The registry of backends: the one place that chooses a backend for a target."""

from __future__ import annotations

from accelctl.backends.base import Backend
from accelctl.backends.cpu import CpuBackend
from accelctl.backends.deepspeed.backend import DeepSpeedBackend, DeepSpeedInferenceBackend
from accelctl.backends.gaudi.backend import GaudiBackend
from accelctl.backends.te_fp8.backend import TeFp8Backend
from accelctl.backends.torchrun import TorchrunBackend
from accelctl.backends.xla_neuron.backend import XlaNeuronBackend
from accelctl.engines.base import Engine, LocalEngine
from accelctl.spec.types import TargetSpec, WorkloadSpec

#: in selection order: the first that selects a target wins.  Vendor stacks first
#: (Gaudi, Neuron), then what a target's settings ask for (fp8/TE layers, DeepSpeed),
#: then the generic launchers.
BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        CpuBackend(),
        GaudiBackend(),
        XlaNeuronBackend(),
        TeFp8Backend(),
        DeepSpeedInferenceBackend(),
        DeepSpeedBackend(),
        TorchrunBackend(),
    )
}

#: engines by name (``engine = ...`` in a target, ``--engine`` on the command line)
ENGINES: dict[str, Engine] = {e.name: e for e in (LocalEngine(),)}


def choose(spec: WorkloadSpec, target: TargetSpec) -> tuple[Backend | None, list[str]]:
    """The backend for a target, or None with the reasons none fits."""
    if target.backend:
        b = BACKENDS.get(target.backend)
        if b is None:
            return None, [f"backend {target.backend} is not available in this version of accelctl"]
        why = b.unsupported(spec, target)
        return (None, why) if why else (b, [])
    # the first backend that selects the target decides: if it cannot run it, the target is
    # refused with its reasons rather than handed to a generic backend that would ignore
    # what the target asked for (fp8, an example script, ZeRO...)
    for b in BACKENDS.values():
        if b.selects(spec, target):
            why = b.unsupported(spec, target)
            return (None, [f"{b.name}: {w}" for w in why]) if why else (b, [])
    reasons = [f"{b.name}: {'; '.join(b.unsupported(spec, target)) or 'not selected'}" for b in BACKENDS.values()]
    return None, reasons

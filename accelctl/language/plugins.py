"""The plug-ins accelctl has, by name, and the one place that imports them lazily.

Pure data, low enough for the check pass to offer the names (``backend = ...`` in a
target, ``accelctl.language.schema.BACKENDS``) without importing a single plug-in.  A backend
is its package under ``accelctl/backends/`` plus one row in ``BACKENDS``; an engine is its
modules under ``accelctl/engines/`` plus one row in ``ENGINES`` naming its ``EngineRow``,
which holds every fact about it the language, the docs and the planner read.  Everything
loaded by name goes through ``resolve``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from accelctl.frozen import Value, field

#: backend name -> "module:Class", in selection order: the first backend that selects a
#: target wins.  Vendor stacks first (Gaudi, Neuron), then what a target's settings ask for
#: (fp8/TE layers, DeepSpeed), then the generic launchers.
BACKENDS: dict[str, str] = {
    "cpu": "accelctl.backends.cpu:CpuBackend",
    "gaudi": "accelctl.backends.gaudi.backend:GaudiBackend",
    "xla_neuron": "accelctl.backends.xla_neuron.backend:XlaNeuronBackend",
    "te_fp8": "accelctl.backends.te_fp8.backend:TeFp8Backend",
    "deepspeed_inference": "accelctl.backends.deepspeed.backend:DeepSpeedInferenceBackend",
    "deepspeed": "accelctl.backends.deepspeed.backend:DeepSpeedBackend",
    "torchrun": "accelctl.backends.torchrun:TorchrunBackend",
}

#: engine name -> "module:ROW", the engine's row (``engine = ...`` in a target, ``--engine``).
#: Row modules import only the spec's value types, so ``validate`` reads an engine's settings
#: without importing the engine.
ENGINES: dict[str, str] = {
    "local": "accelctl.engines.local_settings:ROW",
    "torchrun": "accelctl.engines.torchrun_settings:ROW",
    "slurm": "accelctl.engines.slurm_settings:ROW",
    "kubernetes": "accelctl.engines.kubernetes_settings:ROW",
    "aws_batch": "accelctl.engines.batch_settings:ROW",
}


class EngineRow(Value):
    """Every fact about an engine that is not its code: what the language accepts in its block,
    what the docs say of it, where its classes are, and how a plan treats it."""

    name: str
    #: "module:Class" of its ``accelctl.engines.base.Engine``
    engine: str
    #: one line for the docs and ``--engine``'s help
    summary: str
    #: ``engine <name> { ... }`` settings -> value type (``accelctl.language.values``)
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: setting -> what it means (docs/language.md)
    meanings: Mapping[str, str] = field(default_factory=dict)
    #: its plan-time refusal code, and what that code covers (docs/language.md)
    code: str = ""
    refuses: str = ""
    #: "module:Class" of the scheduler that submits, follows and cancels its job ("": none)
    scheduler: str = ""
    #: the key of its block naming the container image its job runs in ("": it takes none)
    image_key: str = ""
    #: what a target's ``stack { image }`` means under it when it takes no image ("": the
    #: launches run on this machine, outside any image)
    image_note: str = ""
    #: its launches start on this machine (their folders must resolve here)
    runs_here: bool = False


_resolved: dict[str, Any] = {}


def resolve(path: str) -> Any:
    """The object a ``"module:name"`` path names, imported on first use and kept."""
    if path not in _resolved:
        module, _, name = path.partition(":")
        _resolved[path] = getattr(importlib.import_module(module), name)
    return _resolved[path]


def engine_row(name: str) -> EngineRow:
    """Engine ``name``'s row; KeyError for a name the table does not have."""
    return resolve(ENGINES[name])

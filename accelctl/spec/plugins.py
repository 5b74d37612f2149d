"""The plug-ins accelctl has, by name: where each backend and engine lives, as strings.

Pure data, low enough for the check pass to offer the names (``backend = ...`` in a
target, ``accelctl.spec.schema.BACKENDS``) without importing a single plug-in.  The
registry (``accelctl.plan.registry``) imports the classes from these paths.  A new
backend is its package under ``accelctl/backends/`` plus one row here.
"""

from __future__ import annotations

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

#: engine name -> "module:Class" (``engine = ...`` in a target, ``--engine``)
ENGINES: dict[str, str] = {
    "local": "accelctl.engines.base:LocalEngine",
    "aws_batch": "accelctl.engines.aws_batch:AwsBatchEngine",
    "slurm": "accelctl.engines.slurm:SlurmEngine",
    "torchrun": "accelctl.engines.torchrun:TorchrunEngine",
    "kubernetes": "accelctl.engines.kubernetes:KubernetesEngine",
}

#: engine name -> "module:TABLE" of the settings it declares (``engine <name> { ... }``): small
#: modules beside each engine that import only the spec's value types, so the check pass reads
#: an engine's settings without importing the engine (``accelctl.engines.settings``)
ENGINE_SETTINGS: dict[str, str] = {
    "torchrun": "accelctl.engines.torchrun_settings:SETTINGS",
    "slurm": "accelctl.engines.slurm_settings:SETTINGS",
    "kubernetes": "accelctl.engines.kubernetes_settings:SETTINGS",
    "aws_batch": "accelctl.engines.batch_settings:SETTINGS",
}

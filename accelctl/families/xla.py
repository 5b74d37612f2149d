"""AWS Trainium and Inferentia through torch-xla and torch-neuronx: XLA's collectives between
ranks, found by ``/dev/neuron*``."""

from __future__ import annotations

from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

FAMILY = DeviceFamily("xla", "xla", "torch-xla (and torch-neuronx on Trainium/Inferentia)",
                      f"{WORKER_DEVICES}:XlaAdapter", Detection(device_files=("/dev/neuron*",)),
                      probes=("torch_xla", "neuron"), sdk="neuron", sdk_title="Neuron SDK",
                      options=("neuron_parallel_compile", "xla_use_bf16"), parallelisms=("tensor", "pipeline"),
                      not_built=(("fsdp", "Neuron shards through neuronx-distributed (optimum-neuron), not torch FSDP: "
                                          "parallel = zero(stage = 1, tp = N) (ZeRO-1 over the data-parallel ranks, "
                                          "tensor parallel inside each group of N NeuronCores)"),),
                      # counted in NeuronCores (the catalog's unit), two to a /dev/neuron device
                      k8s_resource="aws.amazon.com/neuroncore", batch_device_files=("/dev/neuron{i}",),
                      batch_units_per_file=2)

#: ``accelctl doctor``'s probes of this stack, each printing one JSON object in a child interpreter
PROBES = {
    "torch_xla": (
        "import json, torch_xla, torch_xla.runtime as xr\n"
        "print(json.dumps({'version': torch_xla.__version__, 'device_type': xr.device_type()}))"
    ),
    "neuron": "import json, torch_neuronx\nprint(json.dumps({'version': torch_neuronx.__version__}))",
}

"""AWS Trainium and Inferentia through torch-xla and torch-neuronx: XLA's collectives between
ranks, found by ``/dev/neuron*``."""

from __future__ import annotations

from accelctl.families.hardware import GB, TFLOPS, Datasheet, Device, Figure, Instance, sheet
from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

FAMILY = DeviceFamily("xla", "xla", "torch-xla (and torch-neuronx on Trainium/Inferentia)",
                      f"{WORKER_DEVICES}:XlaAdapter", Detection(device_files=("/dev/neuron*",)),
                      probes=("torch_xla", "neuron"), backends=("xla_neuron",), compiles_step=True, sdk="neuron", sdk_title="Neuron SDK",
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


# --------------------------------------------------------------------------- hardware
#: its devices (``accelctl.catalog.DEVICES``)
DEVICES: tuple[Device, ...] = (
    # Neuron devices are counted in NeuronCores (what torchrun --nproc_per_node counts).
    Device("trn1", "aws", "xla", 16 * GB, {"fp32": 23.75 * TFLOPS, "bf16": 95 * TFLOPS},
           interconnect="NeuronLink-v2, 2D torus", trains_convolutions=False, nxd_tensor_parallel=True,
           note="one NeuronCore-v2 of Trainium (2 per chip)"),
    Device("inf2", "aws", "xla", 16 * GB, {"fp32": 23.75 * TFLOPS, "bf16": 95 * TFLOPS},
           interconnect="NeuronLink-v2, ring", trains_convolutions=False, nxd_tensor_parallel=True,
           note="one NeuronCore-v2 of Inferentia2 (2 per chip)"),
)

#: AWS's price list, us-east-1 on-demand Linux (public copies of the bulk API; docs/prices.md); a
#: Trainium or Inferentia2 chip is two of these devices (NeuronCores)
_AWS = "AWS on-demand us-east-1 (AWS Price List bulk API, as copied publicly; docs/prices.md)"

#: instances that rent them, with on-demand prices
INSTANCES: tuple[Instance, ...] = (
    Instance("trn1.2xlarge", "trn1", 2, 8, 1.34375, _AWS, "", "2023", "aws", memory_gib=32),
    Instance("trn1.32xlarge", "trn1", 32, 128, 21.50, _AWS, "8x100 Gbps EFA", "2026-07-28", "aws", memory_gib=512),
    Instance("trn1n.32xlarge", "trn1", 32, 128, 24.78, _AWS, "16x100 Gbps EFA", "2026-07-28", "aws", memory_gib=512),
    Instance("inf2.xlarge", "inf2", 2, 4, 0.75818, _AWS, "", "2023", "aws", memory_gib=16),
    Instance("inf2.8xlarge", "inf2", 2, 32, 1.96786, _AWS, "", "2023", "aws", memory_gib=128),
    Instance("inf2.24xlarge", "inf2", 12, 96, 6.49063, _AWS, "", "2023", "aws", memory_gib=384),
    Instance("inf2.48xlarge", "inf2", 24, 192, 12.98127, _AWS, "", "2023", "aws", memory_gib=768),
)

_AWS_NEURON = ("AWS Neuron docs, Trainium / Inferentia2 architecture "
               "(awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/)")

_DEV = {d.name: d for d in DEVICES}

#: what estimates read besides the peaks (``accelctl.catalog.DATASHEETS``)
DATASHEETS: tuple[Datasheet, ...] = (
    # per NeuronCore-v2 (two per chip): half the chip's 820 GB/s HBM; NeuronLink-v2
    # 768 GB/s per trn1 chip, 192 GB/s per inf2 chip (halved per core)
    sheet(_DEV["trn1"], _AWS_NEURON, "2023-04", 410e9, 384e9),
    sheet(_DEV["inf2"], _AWS_NEURON, "2023-04", 410e9, 96e9),
)

#: network between nodes of its instances, bytes/s per node per direction (``accelctl.catalog.SCALE_OUT``)
SCALE_OUT: dict[str, Figure] = {
    "trn1.32xlarge": Figure(800e9 / 8, "AWS Trn1 instance page: 800 Gbps EFA", "2022-10"),
}

"""Device and instance catalog: memory, peak FLOP/s, capabilities, prices.

Pure data.  Peak figures are vendors' dense (no sparsity) tensor-core numbers per
device; prices are on-demand list prices per instance-hour (USD), dated, and the
seeds' own prices where a seed quotes one.  A workload's ``price = ... usd/h``
always wins over the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TFLOPS = 1e12


@dataclass(frozen=True)
class Device:
    name: str
    vendor: str
    #: runtime family the worker's device adapter drives: cpu, cuda, hpu, xla
    adapter: str
    #: memory per device in bytes (0 = host memory, unknown in advance)
    memory_bytes: int
    #: peak dense FLOP/s per dtype (fp32, tf32, bf16, fp16, fp8); absent = unknown
    peak_flops: dict[str, float] = field(default_factory=dict)
    #: fp8 training is possible (Transformer Engine on Hopper/Ada, Habana fp8 on Gaudi2/3)
    fp8: bool = False
    #: native bf16 arithmetic (CPU: depends on the host, decided at run time)
    bf16: bool = True
    #: what connects devices inside a node
    interconnect: str = ""
    #: the machine accelctl itself runs on: a plan may read its cores, memory and CPU flags;
    #: it runs the stand-ins, and is the only device a workload's data ``fallback`` applies
    #: to (agrees with the family's ``accelctl.contract.devices.DeviceFamily.host``)
    host: bool = False
    #: its compiler can train convolutional models (the Neuron SDK cannot)
    trains_convolutions: bool = True
    #: trains in lazy mode unless the target says ``lazy_mode = off``: the first iteration
    #: accumulates the whole step in one graph before any of it runs (SynapseAI's PyTorch
    #: bridge; seed 000), which the memory fit counts (``accelctl.plan.activations``)
    lazy_graphs: bool = False
    #: one line shown in plans
    note: str = ""


GB = 10**9
GiB = 2**30

DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        Device("cpu", "any", "cpu", 0, {}, fp8=False, bf16=False, host=True, note="host CPU; runs fp32 stand-ins"),
        Device("v100", "nvidia", "cuda", 32 * GB, {"fp32": 15.7 * TFLOPS, "fp16": 125 * TFLOPS},
               bf16=False, interconnect="NVLink 2 (300 GB/s)"),
        Device("a100_40gb", "nvidia", "cuda", 40 * GB,
               {"fp32": 19.5 * TFLOPS, "tf32": 156 * TFLOPS, "bf16": 312 * TFLOPS, "fp16": 312 * TFLOPS},
               interconnect="NVLink 3 (600 GB/s)"),
        Device("a100", "nvidia", "cuda", 80 * GB,
               {"fp32": 19.5 * TFLOPS, "tf32": 156 * TFLOPS, "bf16": 312 * TFLOPS, "fp16": 312 * TFLOPS},
               interconnect="NVLink 3 (600 GB/s)", note="A100 80GB"),
        Device("h100", "nvidia", "cuda", 80 * GB,
               {"fp32": 67 * TFLOPS, "tf32": 495 * TFLOPS, "bf16": 989 * TFLOPS, "fp16": 989 * TFLOPS,
                "fp8": 1979 * TFLOPS}, fp8=True, interconnect="NVLink 4 (900 GB/s)", note="H100 SXM 80GB"),
        Device("l4", "nvidia", "cuda", 24 * GB, {"fp32": 30.3 * TFLOPS, "bf16": 121 * TFLOPS, "fp8": 242 * TFLOPS},
               fp8=True, interconnect="PCIe 4"),
        Device("l40s", "nvidia", "cuda", 48 * GB, {"fp32": 91.6 * TFLOPS, "bf16": 362 * TFLOPS, "fp8": 733 * TFLOPS},
               fp8=True, interconnect="PCIe 4"),
        Device("gaudi", "habana", "hpu", 32 * GB, {}, interconnect="RoCE 10x100 GbE on chip", lazy_graphs=True,
               note="Gaudi1 HL-205 (dl1.24xlarge)"),
        Device("gaudi2", "habana", "hpu", 96 * GB, {"bf16": 432 * TFLOPS, "fp8": 865 * TFLOPS}, fp8=True,
               interconnect="RoCE 24x100 GbE on chip", lazy_graphs=True),
        Device("gaudi3", "habana", "hpu", 128 * GB, {"bf16": 1835 * TFLOPS, "fp8": 1835 * TFLOPS}, fp8=True,
               interconnect="RoCE 24x200 GbE on chip", lazy_graphs=True),
        # Neuron devices are counted in NeuronCores (what torchrun --nproc_per_node counts).
        Device("trn1", "aws", "xla", 16 * GB, {"fp32": 23.75 * TFLOPS, "bf16": 95 * TFLOPS},
               interconnect="NeuronLink-v2, 2D torus", trains_convolutions=False,
               note="one NeuronCore-v2 of Trainium (2 per chip)"),
        Device("inf2", "aws", "xla", 16 * GB, {"fp32": 23.75 * TFLOPS, "bf16": 95 * TFLOPS},
               interconnect="NeuronLink-v2, ring", trains_convolutions=False,
               note="one NeuronCore-v2 of Inferentia2 (2 per chip)"),
    )
}


@dataclass(frozen=True)
class Instance:
    name: str
    device: str
    devices: int
    vcpus: int
    #: on-demand USD per hour (None: no public list price)
    price_per_hour: float | None
    price_source: str = ""
    network: str = ""


INSTANCES: dict[str, Instance] = {
    i.name: i
    for i in (
        Instance("p4d.24xlarge", "a100_40gb", 8, 96, 32.77, "seed 002 (AWS on-demand, us-east-1)", "4x100 Gbps EFA"),
        Instance("p4de.24xlarge", "a100", 8, 96, 40.97, "AWS on-demand us-east-1, 2023", "4x100 Gbps EFA"),
        Instance("p5.48xlarge", "h100", 8, 192, 98.32, "seed 002 (AWS on-demand, us-east-1)", "32x100 Gbps EFA"),
        Instance("dl1.24xlarge", "gaudi", 8, 96, 13.11, "seed 003 (~$13/h), AWS on-demand us-east-1",
                 "4x100 Gbps EFA"),
        Instance("trn1.2xlarge", "trn1", 2, 8, 1.34375, "AWS on-demand us-east-1, 2023"),
        Instance("trn1.32xlarge", "trn1", 32, 128, 21.50, "AWS on-demand us-east-1, 2023", "8x100 Gbps EFA"),
        Instance("inf2.xlarge", "inf2", 2, 4, 0.75818, "AWS on-demand us-east-1, 2023"),
        Instance("inf2.8xlarge", "inf2", 2, 32, 1.96786, "AWS on-demand us-east-1, 2023"),
        Instance("inf2.24xlarge", "inf2", 12, 96, 6.49063, "AWS on-demand us-east-1, 2023"),
        Instance("inf2.48xlarge", "inf2", 24, 192, 12.98127, "AWS on-demand us-east-1, 2023"),
        Instance("gaudi2-hls", "gaudi2", 8, 160, None, "no public on-demand list price in the seeds"),
        Instance("dgx-a100", "a100", 8, 256, None, "on-premises server"),
        Instance("local", "cpu", 1, 0, None, "this machine"),
    )
}

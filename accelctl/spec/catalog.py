"""Device and instance catalog: memory, peak FLOP/s, capabilities, prices.

Pure data.  Peak figures are vendors' dense (no sparsity) tensor-core numbers per
device; prices are on-demand list prices per instance-hour (USD), dated, and the
seeds' own prices where a seed quotes one.  A workload's ``price = ... usd/h``
always wins over the catalog.
"""

from __future__ import annotations

from dataclasses import field

from accelctl.frozen import Value, value

TFLOPS = 1e12


@value
class Device(Value):
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
    #: to (agrees with the family's ``accelctl.families.DeviceFamily.host``)
    host: bool = False
    #: its compiler can train convolutional models (the Neuron SDK cannot)
    trains_convolutions: bool = True
    #: trains in lazy mode unless the target says ``lazy_mode = off``: the first iteration
    #: accumulates the whole step in one graph before any of it runs (SynapseAI's PyTorch
    #: bridge; seed 000), which the memory fit counts (``accelctl.plan.activations``)
    lazy_graphs: bool = False
    #: tensor parallel goes through neuronx-distributed (optimum-neuron's models): key/value
    #: heads are replicated up to the tp degree (training: ``kv_size_multiplier``) and, for
    #: generate/infer, query heads are padded to a multiple of it (``get_shardable_head_counts``)
    nxd_tensor_parallel: bool = False
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
               interconnect="NeuronLink-v2, 2D torus", trains_convolutions=False, nxd_tensor_parallel=True,
               note="one NeuronCore-v2 of Trainium (2 per chip)"),
        Device("inf2", "aws", "xla", 16 * GB, {"fp32": 23.75 * TFLOPS, "bf16": 95 * TFLOPS},
               interconnect="NeuronLink-v2, ring", trains_convolutions=False, nxd_tensor_parallel=True,
               note="one NeuronCore-v2 of Inferentia2 (2 per chip)"),
    )
}


@value
class Instance(Value):
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


# --------------------------------------------------------------------------- datasheets
# What ``accelctl estimate`` reads besides ``Device.peak_flops``: memory bandwidth, the
# bandwidth of the links between devices of a node and between nodes, each figure with the
# document it comes from and that document's date.  Bandwidths are bytes per second, per
# device and per direction (vendors often quote NVLink bidirectional: halved here).


@value
class Figure(Value):
    value: float
    #: vendor datasheet / whitepaper (name or URL); "ASSUMPTION: ..." where none is published
    source: str
    #: the source's date (YYYY-MM)
    date: str


@value
class Datasheet(Value):
    device: str
    #: dense peak FLOP/s per dtype: the figures of ``Device.peak_flops``, with their source
    flops: dict[str, Figure]
    #: device memory bandwidth (HBM), bytes/s
    memory_bandwidth: Figure
    #: per device, per direction, to the other devices of the node, bytes/s
    link_bandwidth: Figure


_NV_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
_NV_H100 = "NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
_NV_V100 = "NVIDIA V100 datasheet (images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf)"
_NV_L4 = "NVIDIA L4 datasheet (resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet)"
_NV_L40S = "NVIDIA L40S datasheet (resources.nvidia.com/en-us-l40s/l40s-datasheet-28413)"
_HB_G1 = "Habana Gaudi HL-205 mezzanine card product brief (habana.ai, HL-205 data sheet)"
_HB_G2 = "Habana Gaudi2 white paper, ver 1.1 (habana.ai/wp-content/uploads/2022/05/Gaudi2-Whitepaper.pdf)"
_HB_G3 = "Intel Gaudi 3 AI accelerator white paper (intel.com/content/www/us/en/content-details/817486)"
_AWS_NEURON = ("AWS Neuron docs, Trainium / Inferentia2 architecture "
               "(awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/)")


def _sheet(device: str, source: str, date: str, hbm: float, link: float, link_source: str = "",
           flops_source: str = "", assumed: dict[str, Figure] | None = None) -> Datasheet:
    flops = {k: Figure(v, flops_source or source, date) for k, v in DEVICES[device].peak_flops.items()}
    return Datasheet(device, flops | (assumed or {}), Figure(hbm, source, date),
                     Figure(link, link_source or source, date))


#: Gaudi's fp32 matrix rate: Habana publishes none (the Gaudi2 and Gaudi 3 white papers give
#: the MME's bf16 and fp8 peaks only), so an fp32 estimate on Gaudi rests on this stated ratio
#: to the bf16 peak; it is an estimate's figure only (``Device.peak_flops``, which MFU reads,
#: stays without it)
GAUDI_FP32_OF_BF16 = 0.25
_HB_FP32 = ("ASSUMPTION: Habana publishes no fp32 peak; taken as 1/4 of the bf16 MME peak ({bf16:g} TFLOPS), "
            "between the TPC vector units' 1/2 (docs.habana.ai TPC User Guide: 64 float vs 128 INT16 ops per "
            "cycle) and the 1/16 of NVIDIA's non-tensor-core fp32 (A100 datasheet: 19.5 vs 312 TFLOPS)")


def _gaudi_fp32(bf16: float, date: str) -> dict[str, Figure]:
    return {"fp32": Figure(bf16 * GAUDI_FP32_OF_BF16, _HB_FP32.format(bf16=bf16 / TFLOPS), date)}


DATASHEETS: dict[str, Datasheet] = {
    s.device: s
    for s in (
        _sheet("v100", _NV_V100, "2020-01", 900e9, 150e9),
        _sheet("a100_40gb", _NV_A100, "2021-06", 1555e9, 300e9),     # NVLink 600 GB/s bidirectional
        _sheet("a100", _NV_A100, "2021-06", 2039e9, 300e9),
        _sheet("h100", _NV_H100, "2023-03", 3350e9, 450e9),          # NVLink 900 GB/s bidirectional
        _sheet("l4", _NV_L4, "2023-03", 300e9, 32e9),                # PCIe Gen4 x16
        _sheet("l40s", _NV_L40S, "2023-08", 864e9, 32e9),
        # Gaudi1: 32 GB HBM2 at 1 TB/s; 10 x 100 GbE RoCE on chip, 7 of them full-mesh inside
        # the node (seed 001: 700 Gbps) = 87.5 GB/s per direction
        Datasheet("gaudi", {"bf16": Figure(108e12, "ASSUMPTION: Habana publishes no Gaudi1 matrix peak; "
                                                   "taken as 1/4 of Gaudi2's 432 TFLOPS", "2022-05")}
                  | _gaudi_fp32(108e12, "2022-05"),
                  Figure(1000e9, _HB_G1, "2021-10"), Figure(87.5e9, "seed 001 (700 Gbps full mesh)", "2022-01")),
        # Gaudi2: 96 GB HBM2E at 2.45 TB/s; 24 x 100 GbE, 21 inside the node = 262.5 GB/s
        _sheet("gaudi2", _HB_G2, "2022-05", 2450e9, 262.5e9, flops_source=_HB_G3 + " (Gaudi2 column)",
               assumed=_gaudi_fp32(432e12, "2024-04")),
        _sheet("gaudi3", _HB_G3, "2024-04", 3700e9, 525e9, assumed=_gaudi_fp32(1835e12, "2024-04")),
        # per NeuronCore-v2 (two per chip): half the chip's 820 GB/s HBM; NeuronLink-v2
        # 768 GB/s per trn1 chip, 192 GB/s per inf2 chip (halved per core)
        _sheet("trn1", _AWS_NEURON, "2023-04", 410e9, 384e9),
        _sheet("inf2", _AWS_NEURON, "2023-04", 410e9, 96e9),
    )
}

#: network between nodes, bytes/s per node per direction (the instance's EFA), with source
SCALE_OUT: dict[str, Figure] = {
    "dl1.24xlarge": Figure(400e9 / 8, "AWS DL1 instance page: 400 Gbps EFA (seed 001)", "2021-10"),
    "p4d.24xlarge": Figure(400e9 / 8, "AWS P4d instance page: 400 Gbps EFA", "2020-11"),
    "p4de.24xlarge": Figure(400e9 / 8, "AWS P4de instance page: 400 Gbps EFA", "2022-05"),
    "p5.48xlarge": Figure(3200e9 / 8, "AWS P5 instance page: 3200 Gbps EFA v2", "2023-07"),
    "trn1.32xlarge": Figure(800e9 / 8, "AWS Trn1 instance page: 800 Gbps EFA", "2022-10"),
}
#: an instance the table above does not list: 100 Gbps Ethernet between nodes
DEFAULT_SCALE_OUT = Figure(100e9 / 8, "ASSUMPTION: 100 Gbps Ethernet between nodes", "2024-01")

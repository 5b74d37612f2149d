"""NVIDIA GPUs through PyTorch's CUDA build: NCCL between ranks, found by ``/dev/nvidia0`` or
``nvidia-smi``; probed by the ``torch`` probe (``accelctl.families.cpu``)."""

from __future__ import annotations

from accelctl.families.hardware import GB, TFLOPS, Datasheet, Device, Figure, Instance, sheet
from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

FAMILY = DeviceFamily("cuda", "nccl", "PyTorch with CUDA", f"{WORKER_DEVICES}:CudaAdapter",
                      Detection(device_files=("/dev/nvidia0",), tools=("nvidia-smi",)), probes=("torch",),
                      backends=("te_fp8", "deepspeed_inference", "deepspeed", "torchrun"),
                      sdk="cuda", sdk_title="CUDA", options=("te_layers", "te_version", "pin_memory"),
                      parallelisms=("fsdp", "tensor", "pipeline"), k8s_resource="nvidia.com/gpu", slurm_gres="gpu",
                      batch_gpu=True, deepspeed_accelerator="cuda", deepspeed_fused_optimizers=True, fused_sdpa=True,
                      fp8_built=True)

PROBES: dict[str, str] = {}


# --------------------------------------------------------------------------- hardware
#: its devices (``accelctl.catalog.DEVICES``)
DEVICES: tuple[Device, ...] = (
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
    # the H100's GH100 die and clocks with 141 GB of HBM3e: the same dense peaks, more memory and bandwidth
    Device("h200", "nvidia", "cuda", 141 * GB,
           {"fp32": 67 * TFLOPS, "tf32": 495 * TFLOPS, "bf16": 989 * TFLOPS, "fp16": 989 * TFLOPS,
            "fp8": 1979 * TFLOPS}, fp8=True, interconnect="NVLink 4 (900 GB/s)", note="H200 SXM 141GB"),
    Device("l4", "nvidia", "cuda", 24 * GB, {"fp32": 30.3 * TFLOPS, "bf16": 121 * TFLOPS, "fp8": 242 * TFLOPS},
           fp8=True, interconnect="PCIe 4"),
    Device("l40s", "nvidia", "cuda", 48 * GB, {"fp32": 91.6 * TFLOPS, "bf16": 362 * TFLOPS, "fp8": 733 * TFLOPS},
           fp8=True, interconnect="PCIe 4"),
)

#: AWS's price cut of P4 and P5 on-demand prices from 2025-06-01
_AWS_CUT = ("AWS on-demand us-east-1 after its P4/P5 price cut (AWS News Blog, 2025-06-05, \"Announcing up to "
            "45% price reduction for Amazon EC2 NVIDIA GPU-accelerated instances\"; docs/prices.md)")
#: AWS's price list, us-east-1 on-demand Linux (public copies of the bulk API; docs/prices.md)
_AWS_LIST = "AWS on-demand us-east-1 (AWS Price List bulk API, as copied publicly; docs/prices.md)"

#: instances that rent them, with on-demand prices
INSTANCES: tuple[Instance, ...] = (
    Instance("p4d.24xlarge", "a100_40gb", 8, 96, 21.96, _AWS_CUT, "4x100 Gbps EFA", "2025-06-01", "aws", memory_gib=1152),
    Instance("p4de.24xlarge", "a100", 8, 96, 27.45, _AWS_CUT, "4x100 Gbps EFA", "2025-06-01", "aws", memory_gib=1152),
    Instance("p5.48xlarge", "h100", 8, 192, 55.04, _AWS_CUT, "32x100 Gbps EFA", "2025-06-01", "aws", memory_gib=2048),
    Instance("p5.4xlarge", "h100", 1, 16, 6.88, _AWS_LIST, "", "2026-07-28", "aws", memory_gib=256),
    Instance("p5en.48xlarge", "h200", 8, 192, 63.30, _AWS_CUT, "16x200 Gbps EFA", "2025-06-01", "aws", memory_gib=2048),
    Instance("p5e.48xlarge", "h200", 8, 192, None, "AWS: Capacity Blocks only, no on-demand price (" + _AWS_LIST
             + ")", "32x100 Gbps EFA", "2026-07-28", "aws", memory_gib=2048),
    Instance("g6.xlarge", "l4", 1, 4, 0.8048, _AWS_LIST, "", "", "aws", memory_gib=16),
    Instance("g6e.xlarge", "l40s", 1, 4, 1.861, _AWS_LIST, "", "", "aws", memory_gib=32),
    Instance("p3.2xlarge", "v100", 1, 8, 3.06, _AWS_LIST, "", "", "aws", memory_gib=61),
    Instance("gpu_8x_a100_80gb_sxm4", "a100", 8, 240, 14.32, "Lambda on-demand (its instance-types API, as copied "
             "by skypilot-org/skypilot-catalog catalogs/v7/lambda/vms.csv): 8x A100 80GB SXM4, DGX A100 class",
             "", "", "lambda"),
    Instance("dgx-a100", "a100", 8, 256, None, "on-premises server"),
)

_NV_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
_NV_H100 = "NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
_NV_H200 = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/)"
_NV_V100 = "NVIDIA V100 datasheet (images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf)"
_NV_L4 = "NVIDIA L4 datasheet (resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet)"
_NV_L40S = "NVIDIA L40S datasheet (resources.nvidia.com/en-us-l40s/l40s-datasheet-28413)"

_DEV = {d.name: d for d in DEVICES}

#: what estimates read besides the peaks (``accelctl.catalog.DATASHEETS``)
DATASHEETS: tuple[Datasheet, ...] = (
    sheet(_DEV["v100"], _NV_V100, "2020-01", 900e9, 150e9),
    sheet(_DEV["a100_40gb"], _NV_A100, "2021-06", 1555e9, 300e9),     # NVLink 600 GB/s bidirectional
    sheet(_DEV["a100"], _NV_A100, "2021-06", 2039e9, 300e9),
    sheet(_DEV["h100"], _NV_H100, "2023-03", 3350e9, 450e9),          # NVLink 900 GB/s bidirectional
    sheet(_DEV["h200"], _NV_H200, "2024-11", 4800e9, 450e9),          # NVLink 900 GB/s bidirectional
    sheet(_DEV["l4"], _NV_L4, "2023-03", 300e9, 32e9),                # PCIe Gen4 x16
    sheet(_DEV["l40s"], _NV_L40S, "2023-08", 864e9, 32e9),
)

#: network between nodes of its instances, bytes/s per node per direction (``accelctl.catalog.SCALE_OUT``)
SCALE_OUT: dict[str, Figure] = {
    "p4d.24xlarge": Figure(400e9 / 8, "AWS P4d instance page: 400 Gbps EFA", "2020-11"),
    "p4de.24xlarge": Figure(400e9 / 8, "AWS P4de instance page: 400 Gbps EFA", "2022-05"),
    "p5.48xlarge": Figure(3200e9 / 8, "AWS P5 instance page: 3200 Gbps EFA v2", "2023-07"),
}

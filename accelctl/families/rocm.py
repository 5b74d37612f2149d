"""AMD Instinct GPUs through PyTorch's ROCm build: torch's CUDA API on HIP (``torch.cuda``,
device type ``cuda``, ``HIP_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES`` choose the devices),
RCCL between ranks behind torch.distributed's ``nccl`` backend, DeepSpeed's ``cuda``
accelerator; found by ``/dev/kfd`` or ``rocm-smi``/``amd-smi``.

Not deepspeed_inference (its kernel injection and AutoTP are not checked on ROCm), not te_fp8
(Transformer Engine's ROCm port is another package than the one accelctl checks)."""

from __future__ import annotations

from accelctl.families.hardware import GB, TFLOPS, Datasheet, Device, Figure, Instance, sheet
from accelctl.families.row import Detection, DeviceFamily

FAMILY = DeviceFamily("rocm", "nccl", "PyTorch with ROCm (torch.cuda on HIP)", "accelctl.worker.rocm:RocmAdapter",
                      Detection(device_files=("/dev/kfd",), tools=("rocm-smi", "amd-smi")), probes=("torch_rocm",),
                      backends=("deepspeed", "torchrun"), sdk="rocm", sdk_title="ROCm", options=("pin_memory",),
                      parallelisms=("fsdp", "tensor", "pipeline"), k8s_resource="amd.com/gpu", slurm_gres="gpu",
                      deepspeed_accelerator="cuda", deepspeed_fused_optimizers=True, fused_sdpa=True,
                      not_run=("ROCm's runtime (HIP kernels, RCCL collectives): no ROCm build of torch and no AMD GPU "
                               "here; the plan is checked by torchrun's and DeepSpeed's own parsers as on CUDA"))

#: ``accelctl doctor``'s probe of this stack: torch's HIP build and the devices it sees
PROBES = {
    "torch_rocm": (
        "import json, torch\n"
        "print(json.dumps({'version': torch.__version__, 'hip': torch.version.hip,"
        " 'available': torch.cuda.is_available() and torch.version.hip is not None,"
        " 'devices': torch.cuda.device_count() if torch.version.hip else 0}))"
    ),
}


# --------------------------------------------------------------------------- hardware
#: its devices (``accelctl.catalog.DEVICES``)
DEVICES: tuple[Device, ...] = (
    # fp8 = False: accelctl's fp8 paths (Transformer Engine, torchao's float8) are checked on
    # CUDA only; the datasheet's fp8 peak stays for the record
    Device("mi300x", "amd", "rocm", 192 * GB,
           {"fp32": 163.4 * TFLOPS, "tf32": 653.7 * TFLOPS, "bf16": 1307.4 * TFLOPS, "fp16": 1307.4 * TFLOPS,
            "fp8": 2614.9 * TFLOPS}, interconnect="Infinity Fabric, 7 links per GPU (896 GB/s)",
           note="AMD Instinct MI300X OAM 192GB"),
)

_OCI = "Oracle Cloud price list, BM.GPU.MI300X.8 at $6.00 per GPU-hour (oracle.com/cloud/price-list)"

#: instances that rent them, with on-demand prices
INSTANCES: tuple[Instance, ...] = (
    Instance("BM.GPU.MI300X.8", "mi300x", 8, 224, 48.00, _OCI, "8x400 Gbps RoCE", "2024-09", "oci"),
)

_AMD_MI300X = ("AMD Instinct MI300X accelerator data sheet "
               "(amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf)")

#: what estimates read besides the peaks (``accelctl.catalog.DATASHEETS``)
DATASHEETS: tuple[Datasheet, ...] = (
    # 5.3 TB/s HBM3; 7 Infinity Fabric links of 128 GB/s (bidirectional) to the node's other
    # seven GPUs = 896 GB/s, 448 GB/s per direction
    sheet(DEVICES[0], _AMD_MI300X, "2023-12", 5300e9, 448e9),
)

#: network between nodes of its instances, bytes/s per node per direction
SCALE_OUT: dict[str, Figure] = {
    "BM.GPU.MI300X.8": Figure(3200e9 / 8, "OCI BM.GPU.MI300X.8 shape: 8 x 400 Gbps RDMA cluster network", "2024-09"),
}

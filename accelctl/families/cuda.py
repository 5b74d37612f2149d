"""NVIDIA GPUs through PyTorch's CUDA build: NCCL between ranks, found by ``/dev/nvidia0`` or
``nvidia-smi``; probed by the ``torch`` probe (``accelctl.families.cpu``)."""

from __future__ import annotations

from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

FAMILY = DeviceFamily("cuda", "nccl", "PyTorch with CUDA", f"{WORKER_DEVICES}:CudaAdapter",
                      Detection(device_files=("/dev/nvidia0",), tools=("nvidia-smi",)), probes=("torch",),
                      sdk="cuda", sdk_title="CUDA", options=("te_layers", "te_version", "pin_memory"),
                      parallelisms=("fsdp", "tensor", "pipeline"), k8s_resource="nvidia.com/gpu", slurm_gres="gpu",
                      batch_gpu=True, deepspeed_accelerator="cuda", deepspeed_fused_optimizers=True, fused_sdpa=True)

PROBES: dict[str, str] = {}

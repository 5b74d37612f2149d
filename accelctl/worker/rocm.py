"""The ROCm family's worker adapter: PyTorch's ROCm build drives AMD GPUs through the
``torch.cuda`` API on HIP, so the loop is CUDA's; what differs is the check that this torch
is the HIP build and the device name it reports."""

from __future__ import annotations

import torch

from accelctl.worker.devices import CudaAdapter


class RocmAdapter(CudaAdapter):
    name = "rocm"

    def _device(self) -> torch.device:
        if torch.version.hip is None:
            raise RuntimeError("device adapter 'rocm' needs PyTorch's ROCm build (torch.version.hip is None: this "
                               f"torch {torch.__version__} is built for "
                               f"{'CUDA ' + torch.version.cuda if torch.version.cuda else 'the CPU'}); install torch "
                               "from PyTorch's ROCm wheels (download.pytorch.org/whl/rocm6.x)")
        if not torch.cuda.is_available():
            raise RuntimeError("device adapter 'rocm' selected but torch.cuda.is_available() is False on this "
                               f"HIP {torch.version.hip} build: no AMD GPU is visible (HIP_VISIBLE_DEVICES, /dev/kfd)")
        torch.cuda.set_device(self.local_rank)
        return torch.device("cuda", self.local_rank)

    def device_name(self) -> str:
        return f"{torch.cuda.get_device_name(self.device)} (HIP {torch.version.hip})"

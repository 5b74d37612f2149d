"""The host CPU: gloo between ranks, always present.  It owns the ``torch`` probe, which the
families running PyTorch's own device API name too."""

from __future__ import annotations

from accelctl.families.hardware import Datasheet, Device, Figure, Instance
from accelctl.families.row import WORKER_DEVICES, Detection, DeviceFamily

# OMP_WAIT_POLICY=PASSIVE: spinning idle threads slowed generation on a small machine
# (docs/internals/run-and-engines.md)
FAMILY = DeviceFamily("cpu", "gloo", "PyTorch", f"{WORKER_DEVICES}:CpuAdapter", Detection(always=True),
                      probes=("torch",),
                      backends=("cpu", "deepspeed_inference", "deepspeed", "torchrun"), parallelisms=("fsdp", "tensor", "pipeline"), host=True, deepspeed_accelerator="cpu", idle_threads_sleep=True, fused_sdpa=True)

#: ``accelctl doctor``'s probes of this stack, each printing one JSON object in a child interpreter
PROBES = {
    "torch": (
        "import json, torch\n"
        "print(json.dumps({'version': torch.__version__, 'cuda_build': torch.version.cuda,"
        " 'cuda_available': torch.cuda.is_available(), 'devices': torch.cuda.device_count(),"
        " 'threads': torch.get_num_threads()}))"
    ),
}


# --------------------------------------------------------------------------- hardware
#: its devices (``accelctl.catalog.DEVICES``)
DEVICES: tuple[Device, ...] = (
    Device("cpu", "any", "cpu", 0, {}, fp8=False, bf16=False, host=True, note="host CPU; runs fp32 stand-ins"),
)

#: instances that rent them, with on-demand prices
INSTANCES: tuple[Instance, ...] = (
    Instance("local", "cpu", 1, 0, None, "this machine"),
)

DATASHEETS: tuple[Datasheet, ...] = ()

SCALE_OUT: dict[str, Figure] = {}

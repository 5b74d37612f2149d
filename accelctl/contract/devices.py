"""Device families: everything accelctl knows about a runtime, in one row per family.

A family is the runtime a device kind belongs to (``accelctl.spec.catalog.Device.adapter``).  Its
row (``DeviceFamily``) owns that family's whole slice: the torch.distributed backend, whether its
device is the host, how to detect one without importing any framework, its ``accelctl doctor``
probes, and the worker adapter as a lazy ``"module:Class"`` path (nothing here imports the
worker).  The planner resolves a target's family into the job (``WorkerJob.device``), so the
worker never maps device kinds itself.  Pure data plus small torch-free functions.
"""

from __future__ import annotations

from accelctl.frozen import Value, value
from accelctl.hostinfo import first_sign


@value
class Detection(Value):
    """Signs that a machine has a family's devices: device files (glob patterns) or a vendor
    tool on PATH; the first sign found is reported as how we know."""

    device_files: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    #: present everywhere (the host CPU)
    always: bool = False

    def found(self) -> str | None:
        if self.always:
            return "always"
        return first_sign(self.device_files, self.tools)


@value
class DeviceFamily(Value):
    name: str
    #: torch.distributed backend its ranks join
    comm: str
    #: the stack it needs in the worker, for messages
    stack: str
    #: the worker adapter class, imported lazily by the worker
    worker_adapter: str
    detect: Detection
    #: names of the ``accelctl doctor`` probes (``PROBES``) that tell whether its stack works here
    probes: tuple[str, ...]
    #: its device is the machine accelctl runs on
    host: bool = False
    #: OpenMP's idle threads sleep instead of spinning (``OMP_WAIT_POLICY=PASSIVE``)
    idle_threads_sleep: bool = False
    #: ``F.scaled_dot_product_attention`` without dropout runs a fused kernel that keeps no
    #: attention scores for backward (the CPU's flash kernel, measured; CUDA's FlashAttention)
    fused_sdpa: bool = False


WORKER_DEVICES = "accelctl.worker.devices"

FAMILIES: dict[str, DeviceFamily] = {
    f.name: f
    for f in (
        # OMP_WAIT_POLICY=PASSIVE on the host CPU: spinning idle threads slowed generation
        # on a small machine (docs/internals/run-and-engines.md)
        DeviceFamily("cpu", "gloo", "PyTorch", f"{WORKER_DEVICES}:CpuAdapter", Detection(always=True),
                     probes=("torch",), host=True, idle_threads_sleep=True, fused_sdpa=True),
        DeviceFamily("cuda", "nccl", "PyTorch with CUDA", f"{WORKER_DEVICES}:CudaAdapter",
                     Detection(device_files=("/dev/nvidia0",), tools=("nvidia-smi",)), probes=("torch",),
                     fused_sdpa=True),
        DeviceFamily("hpu", "hccl", "Habana SynapseAI's PyTorch bridge (habana_frameworks.torch)",
                     f"{WORKER_DEVICES}:HpuAdapter",
                     Detection(device_files=("/dev/accel/accel*",), tools=("hl-smi",)), probes=("habana",)),
        DeviceFamily("xla", "xla", "torch-xla (and torch-neuronx on Trainium/Inferentia)",
                     f"{WORKER_DEVICES}:XlaAdapter", Detection(device_files=("/dev/neuron*",)),
                     probes=("torch_xla", "neuron")),
    )
}

#: ``accelctl doctor`` probes of the device stacks: each prints one JSON object, in a child
#: interpreter (a stack that aborts on import cannot take the doctor down)
PROBES: dict[str, str] = {
    "torch": (
        "import json, torch\n"
        "print(json.dumps({'version': torch.__version__, 'cuda_build': torch.version.cuda,"
        " 'cuda_available': torch.cuda.is_available(), 'devices': torch.cuda.device_count(),"
        " 'threads': torch.get_num_threads()}))"
    ),
    "habana": (
        "import json\nimport habana_frameworks.torch.hpu as hpu\n"
        "print(json.dumps({'available': hpu.is_available(), 'devices': hpu.device_count()}))"
    ),
    "torch_xla": (
        "import json, torch_xla, torch_xla.runtime as xr\n"
        "print(json.dumps({'version': torch_xla.__version__, 'device_type': xr.device_type()}))"
    ),
    "neuron": "import json, torch_neuronx\nprint(json.dumps({'version': torch_neuronx.__version__}))",
}


def present_adapters() -> dict[str, str]:
    """Device families present here -> how we know (always includes the host's)."""
    found = {}
    for fam in FAMILIES.values():
        sign = fam.detect.found()
        if sign is not None:
            found[fam.name] = sign
    return found

"""The row a device family fills in: everything accelctl knows about one runtime (the family a
device kind belongs to, ``accelctl.catalog.Device.adapter``).  Pure data: nothing here
imports a framework or the worker, whose adapter is named as a lazy ``"module:Class"`` path."""

from __future__ import annotations

from accelctl.frozen import Value
from accelctl.hostinfo import first_sign

#: the module of the worker's device adapters
WORKER_DEVICES = "accelctl.worker.devices"


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


class DeviceFamily(Value):
    name: str
    #: torch.distributed backend its ranks join
    comm: str
    #: the stack it needs in the worker, for messages
    stack: str
    #: the worker adapter class, imported lazily by the worker
    worker_adapter: str
    detect: Detection
    #: names of the ``accelctl doctor`` probes (``accelctl.families.PROBES``) that tell whether
    #: its stack works here
    probes: tuple[str, ...]
    #: the backends (``accelctl.language.plugins.BACKENDS``) that plan for its devices; which of
    #: them a target gets is the registry's order and the target's settings
    backends: tuple[str, ...] = ()
    #: its device is the machine accelctl runs on
    host: bool = False
    #: OpenMP's idle threads sleep instead of spinning (``OMP_WAIT_POLICY=PASSIVE``)
    idle_threads_sleep: bool = False
    #: the SDK a workload pins for it, ``stack { sdk = NAME("VERSION") }`` ("" = none), and its title
    sdk: str = ""
    sdk_title: str = ""
    #: target options only this family's devices take (elsewhere E505)
    options: tuple[str, ...] = ()
    #: the sharding strategies accelctl builds on it (of ``fsdp``, ``tensor``, ``pipeline``;
    #: elsewhere refused at the parallel line, E520) and, by strategy, why one is not
    parallelisms: tuple[str, ...] = ()
    not_built: tuple[tuple[str, str], ...] = ()
    #: the Kubernetes extended resource a pod asks for one of its devices by ("" = none)
    k8s_resource: str = ""
    #: the Slurm gres its devices are counted in (``--gres=NAME:N``; "" = none asked for)
    slurm_gres: str = ""
    #: AWS Batch: its devices are the ``GPU`` resource type, or else device files mapped into the
    #: container (``{i}`` numbered), each holding ``batch_units_per_file`` of its devices
    batch_gpu: bool = False
    batch_device_files: tuple[str, ...] = ()
    batch_units_per_file: int = 1
    #: DeepSpeed's accelerator for it (``DS_ACCELERATOR``; "" = the deepspeed backend does not
    #: plan for it), and whether DeepSpeed's fused CUDA optimizers (FusedLamb, FusedAdam) run there
    deepspeed_accelerator: str = ""
    deepspeed_fused_optimizers: bool = False
    #: ``F.scaled_dot_product_attention`` without dropout runs a fused kernel that keeps no
    #: attention scores for backward (the CPU's flash kernel, measured; CUDA's FlashAttention)
    fused_sdpa: bool = False
    #: a backend of its plans FP8 training and inference (its devices' FP8 hardware alone is
    #: not enough: an fp8 target of a family without one is refused at plan, E520)
    fp8_built: bool = False
    #: its runtime compiles the whole step into fused graphs (the Neuron compiler through XLA),
    #: so an estimate counts no per-operator launch overhead
    compiles_step: bool = False
    #: what no check here can run for it (its runtime, when neither its software nor its
    #: devices install here): said in every plan for it and in ``plan --check`` as NOT RUN
    not_run: str = ""

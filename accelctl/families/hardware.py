"""The hardware rows a device family's module fills in: its devices, the instances that rent
them with their prices, and the datasheets estimates read.  Pure data, each figure with its
source and date; ``accelctl.catalog`` gathers every family's rows."""

from __future__ import annotations


from accelctl.frozen import Value, field

TFLOPS = 1e12
GB = 10**9
GiB = 2**30


class Device(Value):
    name: str
    vendor: str
    #: the device family (``accelctl.families``) whose module lists it
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
    #: bridge; seed 000), which the memory fit counts (``accelctl.models.activations``)
    lazy_graphs: bool = False
    #: tensor parallel goes through neuronx-distributed (optimum-neuron's models): key/value
    #: heads are replicated up to the tp degree (training: ``kv_size_multiplier``) and, for
    #: generate/infer, query heads are padded to a multiple of it (``get_shardable_head_counts``)
    nxd_tensor_parallel: bool = False
    #: one line shown in plans
    note: str = ""


class Instance(Value):
    """A machine one rents (or owns) whole: its devices, vCPUs and on-demand list price."""

    name: str
    device: str
    devices: int
    vcpus: int
    #: on-demand USD per hour (None: no public on-demand price)
    price_per_hour: float | None
    price_source: str = ""
    network: str = ""
    #: the day (or month) the price applies from, YYYY-MM[-DD] ("" = none given)
    price_date: str = ""
    #: who rents it: "aws" (what AWS Batch can run), another cloud's name, "" = owned
    cloud: str = ""
    #: its host memory in GiB (the provider's instance type page; 0 = not given)
    memory_gib: int = 0


class Figure(Value):
    value: float
    #: vendor datasheet / whitepaper (name or URL); "ASSUMPTION: ..." where none is published
    source: str
    #: the source's date (YYYY-MM)
    date: str


class Datasheet(Value):
    device: str
    #: dense peak FLOP/s per dtype: the figures of ``Device.peak_flops``, with their source
    flops: dict[str, Figure]
    #: device memory bandwidth (HBM), bytes/s
    memory_bandwidth: Figure
    #: per device, per direction, to the other devices of the node, bytes/s
    link_bandwidth: Figure


def sheet(device: Device, source: str, date: str, hbm: float, link: float, link_source: str = "",
          flops_source: str = "", assumed: dict[str, Figure] | None = None) -> Datasheet:
    """The datasheet of ``device`` whose peaks are its ``peak_flops`` from ``flops_source`` (else
    ``source``), plus ``assumed`` figures; bandwidths from ``source`` (links: ``link_source``)."""
    flops = {k: Figure(v, flops_source or source, date) for k, v in device.peak_flops.items()}
    return Datasheet(device.name, flops | (assumed or {}), Figure(hbm, source, date),
                     Figure(link, link_source or source, date))

"""Device and instance catalog: memory, peak FLOP/s, capabilities, prices, datasheets.

Pure data, gathered from every device family's module (``accelctl.families``: each lists its
devices, the instances that rent them and their datasheets, in the registry's order).  Peak
figures are vendors' dense (no sparsity) tensor-core numbers per device; prices are on-demand
list prices per instance-hour (USD), each with its source and date (docs/prices.md); a seed's
workload writes the price its seed quotes.  A workload's ``price = ... usd/h`` always wins over
the catalog; a target that names a device and no instance is priced as the smallest priced
instance that holds its devices (``holder``), and says so.  Bandwidths are bytes per
second, per device and per direction (vendors often quote links bidirectional: halved).
"""

from __future__ import annotations

from accelctl.families import MODULES
from accelctl.families.hardware import GB, TFLOPS, Datasheet, Device, Figure, GiB, Instance

__all__ = ["DATASHEETS", "DEFAULT_SCALE_OUT", "DEVICES", "GB", "INSTANCES", "SCALE_OUT", "TFLOPS", "Datasheet",
           "Device", "Figure", "GiB", "Instance", "holder", "price_basis"]

DEVICES: dict[str, Device] = {d.name: d for m in MODULES for d in m.DEVICES}

INSTANCES: dict[str, Instance] = {i.name: i for m in MODULES for i in m.INSTANCES}

#: what ``accelctl estimate`` reads besides ``Device.peak_flops``: memory bandwidth and the links
#: between the devices of a node, each figure with its document and that document's date
DATASHEETS: dict[str, Datasheet] = {s.device: s for m in MODULES for s in m.DATASHEETS}

#: network between nodes, bytes/s per node per direction (the instance's EFA), with source
SCALE_OUT: dict[str, Figure] = {name: f for m in MODULES for name, f in m.SCALE_OUT.items()}
#: an instance the table above does not list: 100 Gbps Ethernet between nodes
DEFAULT_SCALE_OUT = Figure(100e9 / 8, "ASSUMPTION: 100 Gbps Ethernet between nodes", "2024-01")


def holder(device: str, devices: int) -> Instance | None:
    """The smallest priced instance with at least ``devices`` of ``device`` (the cheapest of equal
    size): what a target that names only a device is priced as, per node; None: none is priced."""
    priced = [i for i in INSTANCES.values() if i.device == device and i.devices >= devices
              and i.price_per_hour is not None]
    return min(priced, key=lambda i: (i.devices, i.price_per_hour), default=None)


def price_basis(price_from: str, own_instance: str, devices: int, device: str) -> str:
    """Where a catalogued price comes from, in one line (``price_from``: the instance priced; ""
    = not the catalog's): the target's own instance, or the smallest instance holding its
    ``devices`` devices per node."""
    inst = INSTANCES.get(price_from)
    if inst is None:
        return ""
    dated = f", from {inst.price_date}" if inst.price_date else ""
    what = f"{inst.name} at {inst.price_per_hour:g} usd/h per node ({inst.price_source}{dated})"
    if price_from == own_instance:
        return what
    return f"as {what}, the smallest priced instance with {devices} {device}"

"""Device and instance catalog: memory, peak FLOP/s, capabilities, prices, datasheets.

Pure data, gathered from every device family's module (``accelctl.families``: each lists its
devices, the instances that rent them and their datasheets, in the registry's order).  Peak
figures are vendors' dense (no sparsity) tensor-core numbers per device; prices are on-demand
list prices per instance-hour (USD), dated, and the seeds' own prices where a seed quotes one.
A workload's ``price = ... usd/h`` always wins over the catalog.  Bandwidths are bytes per
second, per device and per direction (vendors often quote links bidirectional: halved).
"""

from __future__ import annotations

from accelctl.families import MODULES
from accelctl.families.hardware import GB, TFLOPS, Datasheet, Device, Figure, GiB, Instance

__all__ = ["DATASHEETS", "DEFAULT_SCALE_OUT", "DEVICES", "GB", "INSTANCES", "SCALE_OUT", "TFLOPS", "Datasheet",
           "Device", "Figure", "GiB", "Instance"]

DEVICES: dict[str, Device] = {d.name: d for m in MODULES for d in m.DEVICES}

INSTANCES: dict[str, Instance] = {i.name: i for m in MODULES for i in m.INSTANCES}

#: what ``accelctl estimate`` reads besides ``Device.peak_flops``: memory bandwidth and the links
#: between the devices of a node, each figure with its document and that document's date
DATASHEETS: dict[str, Datasheet] = {s.device: s for m in MODULES for s in m.DATASHEETS}

#: network between nodes, bytes/s per node per direction (the instance's EFA), with source
SCALE_OUT: dict[str, Figure] = {name: f for m in MODULES for name, f in m.SCALE_OUT.items()}
#: an instance the table above does not list: 100 Gbps Ethernet between nodes
DEFAULT_SCALE_OUT = Figure(100e9 / 8, "ASSUMPTION: 100 Gbps Ethernet between nodes", "2024-01")

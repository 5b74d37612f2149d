"""What separates Trainium (trn1) from Inferentia2 (inf2) in a training estimate, and what
the estimate cannot model.

Both carry NeuronCore-v2 with the same published per-core figures, so the roofline gives every
trn1 and inf2 target the same step time per core; what the catalog does separate (NeuronLink-v2,
EFA) is modelled in the collectives.  The host's vCPUs per NeuronCore, which run torch-xla's
tracing and the data loader, are not: no published figure gives that time, so ``missing_fact``
names it in the estimate's why.  See docs/estimate.md ("Where the numbers come from").
"""

from __future__ import annotations

from accelctl.catalog import DEVICES, INSTANCES
from accelctl.workload.types import TargetSpec

#: the devices this note is for (Neuron devices counted in NeuronCores)
NEURON_DEVICES = frozenset({"trn1", "inf2"})


#: the fact no source gives, in the words of the reference report
MISSING = ("missing fact: the host time per step of torch-xla's tracing and the data loader, which the host's "
           "vCPUs per NeuronCore bound (trn1.2xlarge 4, inf2.xlarge 2); per core both chips have the NeuronCore-v2's "
           "published peak and HBM, so the estimate cannot show the inf2/trn1 post's faster Trainium")


def vcpus_per_core(target: TargetSpec) -> float | None:
    """Host vCPUs per NeuronCore of the target's instance (None without a catalogued one)."""
    inst = INSTANCES.get(target.instance or "")
    if inst is None or not inst.devices or not inst.vcpus:
        return None
    return inst.vcpus / inst.devices


def missing_fact(target: TargetSpec) -> str:
    """The why text's clause for a trn1 / inf2 target ("" for any other device)."""
    if target.device not in NEURON_DEVICES:
        return ""
    dev = DEVICES[target.device]
    per_core = vcpus_per_core(target)
    host = (f"{per_core:g} host vCPUs per NeuronCore ({target.instance}: {INSTANCES[target.instance].vcpus} "
            f"vCPUs for {INSTANCES[target.instance].devices} cores)" if per_core is not None
            else "the host's vCPUs per NeuronCore (no catalogued instance)")
    workers = target.options.dataloader_workers
    loader = f"; {workers} loader workers per process" if workers is not None else ""
    return (f"; not modelled: the host time per step of torch-xla's tracing and the data loader "
            f"({host}{loader}): no published figure gives it, and it is the missing fact that would separate trn1 "
            f"from inf2 (the inf2/trn1 post measured trn1 faster); per core both have the NeuronCore-v2's published "
            f"{dev.peak_flops['bf16'] / 1e12:g} TFLOPS bf16 and HBM, so the estimate tells them apart only by "
            f"NeuronLink ({dev.interconnect}) and the network")

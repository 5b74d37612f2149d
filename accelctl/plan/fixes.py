"""Fixes for a target that does not fit: each a few ``--set`` settings, offered only when the
target they make plans.

The candidates are the ways a job is made to fit without another machine, least change first:
gradient checkpointing, sharding the training state (FSDP, ZeRO-3) or the weights
(``deepspeed_inference(tp = N)``), Gaudi's eager mode (lazy mode's first graph keeps every
layer's activations), those together, then the largest micro-batch that fits.  Each is
planned as ``accelctl plan`` would plan it; one that is refused is not offered, so a hint
never proposes what the next ``plan`` refuses.  A fix is machine-readable
(``Diagnostic.fixes``: a label and its ``--set`` arguments) and shown in the hint.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

from accelctl.errors import PlanError
from accelctl.frozen import replace
from accelctl.language.schema import INFERENCE_STRATEGIES
from accelctl.models.activations import hpu_lazy
from accelctl.plan.memory import estimate
from accelctl.workload.types import TargetSpec, WorkloadSpec

#: fixes a hint shows at most
SHOWN = 3
#: tensor-parallel sizes tried, within a node's devices
TP = (8, 4)

Fix = tuple[str, tuple[str, ...]]


#: one change to a target: its label, the change, and the ``--set`` arguments that make it
Change = tuple[str, Callable[[TargetSpec], TargetSpec], tuple[str, ...]]


def _switches(spec: WorkloadSpec, target: TargetSpec) -> list[Change]:
    """Gradient checkpointing on, and Gaudi's eager mode, where they are not already."""
    at, out = f"target.{target.name}.", []
    if spec.task.training and not target.gradient_checkpointing:
        out.append(("gradient checkpointing on", lambda t: replace(t, gradient_checkpointing=True),
                    (f"{at}gradient_checkpointing=on",)))
    if spec.task.training and hpu_lazy(target):
        out.append(("lazy_mode off", lambda t: replace(t, options=replace(t.options, lazy_mode=False)),
                    (f"{at}lazy_mode=off",)))
    return out


def _layouts(spec: WorkloadSpec, target: TargetSpec) -> list[Change]:
    """Sharding layouts stronger than the target's own, over its devices."""
    at, p, n = f"target.{target.name}.", target.parallel, target.world_size
    if n < 2:
        return []
    if spec.task.training:
        out: list[Change] = []
        if p.strategy != "fsdp":
            out.append(("fsdp", lambda t: replace(t, parallel=replace(t.parallel, strategy="fsdp")),
                        (f"{at}parallel=fsdp",)))
        if not (p.strategy == "zero" and p.zero_stage == 3):
            out.append(("zero(stage = 3)", lambda t: replace(t, parallel=replace(t.parallel, strategy="zero",
                                                                                 zero_stage=3)),
                        (f"{at}parallel=zero(stage = 3)",)))
        for tp in (tp for tp in TP if tp <= n and n % tp == 0 and tp != p.tp):  # tensor parallel in a node
            for strategy, layout in (("fsdp", f"fsdp(tp = {tp})"), ("zero", f"zero(stage = 1, tp = {tp})")):
                out.append((layout, lambda t, s=strategy, k=tp: replace(t, parallel=replace(
                    t.parallel, strategy=s, zero_stage=1 if s == "zero" else 0, tp=k)), (f"{at}parallel={layout}",)))
        return out
    (sharded,) = INFERENCE_STRATEGIES  # the weights split over the devices, to generate or score
    if p.strategy == sharded and p.tp == n:
        return []
    layout = f"{sharded}(tp = {n})"
    return [(layout, lambda t: replace(t, parallel=replace(t.parallel, strategy=sharded, tp=n, pp=1)),
             (f"{at}parallel={layout}",))]


def candidates(spec: WorkloadSpec, target: TargetSpec) -> list[tuple[str, TargetSpec, tuple[str, ...]]]:
    """(label, target, ``--set`` arguments) of each way to fit on the same machine: every set of
    switches with at most one layout, fewest changes first."""
    switches, layouts = _switches(spec, target), _layouts(spec, target)
    groups = [list(c) for k in range(len(switches) + 1) for c in combinations(switches, k)]
    chosen = [(*g, layout) if layout else tuple(g) for g in groups for layout in (None, *layouts) if g or layout]
    out = []
    for changes in sorted(chosen, key=len):
        t = target
        for _, change, _ in changes:
            t = change(t)
        out.append((" and ".join(c[0] for c in changes), t, tuple(s for c in changes for s in c[2])))
    return out


def largest_micro(spec: WorkloadSpec, target: TargetSpec) -> int:
    """The largest micro-batch below the target's that its memory fit holds (0: none)."""
    lo, hi = 0, target.batch.micro
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = replace(target, batch=replace(target.batch, micro=mid, global_size=None))
        lo, hi = (mid, hi) if estimate(spec, t).fits else (lo, mid)
    return lo


def fixes(spec: WorkloadSpec, target: TargetSpec, plans: Callable[[WorkloadSpec, TargetSpec], object]) -> list[Fix]:
    """Up to ``SHOWN`` fixes that ``plans`` accepts, fewest settings first, each its label and its
    ``--set`` arguments: the candidates that fit at the target's micro-batch, and the target and
    each candidate at the largest micro-batch that fits."""
    found: list[Fix] = []

    def planned(t: TargetSpec) -> bool:
        try:
            plans(spec, t)
        except PlanError:
            return False
        return True

    tried = candidates(spec, target)
    for label, t, sets in tried:
        if estimate(spec, t).fits and planned(t):
            found.append((label, sets))
    for label, t, sets in ([("", target, ()), *tried] if target.batch.micro > 1 else []):
        micro = largest_micro(spec, t)
        if micro and planned(replace(t, batch=replace(t.batch, micro=micro, global_size=None))):
            found.append((" and ".join(filter(None, (label, f"micro-batch {micro}"))),
                          (*sets, f"target.{target.name}.batch.micro={micro}")))
    return sorted(found, key=lambda f: len(f[1]))[:SHOWN]


def hint(found: list[Fix]) -> str:
    """The E530 hint: the fixes that plan, each with its ``--set`` arguments, or why there is none."""
    if not found:
        return ("no checkpointing, sharding or smaller micro-batch plans on this machine: pick a device with more "
                "memory or more devices (accelctl fit and pick show which)")
    shown = "; ".join(f"{label} ({' '.join('--set ' + s for s in sets)})" for label, sets in found)
    return f"fixes that plan: {shown}; or pick a device with more memory"

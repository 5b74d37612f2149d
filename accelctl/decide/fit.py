"""``accelctl fit FILE -t T``: the largest micro-batch that fits T's memory by the memory model
(``accelctl.plan.memory``, what ``plan`` refuses with E530), as written and with gradient
checkpointing switched, each ZeRO stage and FSDP, and eager mode where T trains in HPU lazy
mode (there checkpointing changes nothing: the model's first-iteration graph); each layout is
planned at its micro-batch, and one the plan refuses on T shows plan's words and no figure.  ``--probe`` (a target whose device this machine has: the host CPU for a cpu
target) confirms the answer for real: one training step at that micro-batch in a run whose
processes may use no more than T's memory (``RLIMIT_DATA``), and one at the next size, which
the model says does not fit; an out-of-memory failure is caught and named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from accelctl.frozen import replace

#: the largest micro-batch looked for (the language's own limit on micro)
MOST = 1_000_000


@dataclass
class Variant:
    name: str
    target: object
    micro: int
    #: the memory model's figures at ``micro`` (and at micro + 1: why it stops there)
    at: object = None
    above: object = None
    #: plan's verdict at ``micro`` where it refuses ("CODE: words"): the row then shows no figure
    refused: str = ""
    #: the ``--set`` arguments that make this layout from the target (``accelctl plan -t T --set ...``)
    settings: tuple[str, ...] = ()
    #: why the model gives this layout the same memory as the target as written, where it does
    same_because: str = ""


def host_memory() -> int:
    """This machine's physical memory: the capacity of a host CPU target written without
    ``memory = ...``."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def at_micro(spec, target, micro: int):
    """``target`` at micro-batch ``micro`` (no global batch), and the memory model's figures there."""
    from accelctl.plan import memory

    t = replace(target, batch=replace(target.batch, micro=micro, global_size=None))
    return t, memory.estimate(spec, t)


def largest(spec, target) -> int:
    """The largest micro-batch whose memory fits (0: not even 1), by doubling then bisection."""
    if not at_micro(spec, target, 1)[1].fits:
        return 0
    lo, hi = 1, 2
    while hi <= MOST and at_micro(spec, target, hi)[1].fits:
        lo, hi = hi, hi * 2
    hi = min(hi, MOST + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if at_micro(spec, target, mid)[1].fits else (lo, mid)
    return lo


#: why switching checkpointing changes nothing in lazy mode (``activations.training``, docs/language.md 3.10)
LAZY_GRAPH = ("HPU lazy mode's first-iteration graph holds every layer's activations with or without "
              "checkpointing (docs/language.md 3.10); lazy_mode = off changes it")


def variants(spec, target) -> list[tuple[str, object, tuple[str, ...]]]:
    """The target as written, with gradient checkpointing switched, ZeRO 1-3 and FSDP (training),
    and eager mode where the target trains in HPU lazy mode; each with the ``--set`` arguments
    that make it from the target."""
    from accelctl.models.activations import hpu_lazy

    at = f"target.{target.name}."
    out = [("as written", target, ())]
    gc = target.gradient_checkpointing
    out.append((f"gradient checkpointing {'off' if gc else 'on'}", replace(target, gradient_checkpointing=not gc),
                (f"{at}gradient_checkpointing={'off' if gc else 'on'}",)))
    if spec.task.training:
        p = target.parallel
        for stage in (1, 2, 3):
            if not (p.strategy == "zero" and p.zero_stage == stage):
                out.append((f"zero(stage = {stage})", replace(
                    target, parallel=replace(p, strategy="zero", zero_stage=stage)),
                    (f"{at}parallel=zero(stage = {stage})",)))
        if p.strategy != "fsdp":
            out.append(("fsdp", replace(target, parallel=replace(p, strategy="fsdp")), (f"{at}parallel=fsdp",)))
        if hpu_lazy(target):
            out.append(("lazy_mode off", replace(target, options=replace(target.options, lazy_mode=False)),
                        (f"{at}lazy_mode=off",)))
    return out


def fit(spec, target, host=None) -> list[Variant]:
    """Each variant's largest micro-batch by the memory model, then planned there as ``accelctl
    plan`` plans it (for ``host``): a variant plan refuses keeps plan's words and shows no figure."""
    from accelctl.api import plan_refusal
    from accelctl.models.activations import hpu_lazy

    if not target.memory_bytes:  # the host CPU without memory = ...: this machine's memory
        target = replace(target, memory_bytes=host_memory())
    out = []
    for name, t, sets in variants(spec, target):
        m = largest(spec, t)
        v = Variant(name, t, m, settings=sets)
        if m:
            v.target, v.at = at_micro(spec, t, m)
            v.above = at_micro(spec, t, m + 1)[1]
            v.settings += (f"target.{target.name}.batch.micro={m}",)
            why = plan_refusal(spec, v.target, host, fixes=False)
            if why is not None:
                v.refused = f"{why.code}: {why.message}"
        else:
            v.above = at_micro(spec, t, 1)[1]
        if name.startswith("gradient checkpointing") and hpu_lazy(t):
            v.same_because = LAZY_GRAPH
        out.append(v)
    return out


def lines(spec, target, vs: list[Variant]) -> list[str]:
    from accelctl.plan.memory import fmt_bytes

    cap = fmt_bytes(vs[0].target.memory_bytes) + ("" if target.memory_bytes else " (this machine's memory)")
    out = [f"fit {spec.name} / {target.name}: {target.device} x{target.world_size}, {cap} per device "
           f"(memory model: accelctl/plan/memory.py, docs/language.md 3.10)"]
    for v in vs:
        if v.refused:  # plan's verdict, and no figure: nothing here runs
            out.append(f"  {v.name:<28} refused by plan on {target.name}: {v.refused}")
            continue
        head = f"  {v.name:<28} largest micro-batch {v.micro}" if v.micro else f"  {v.name:<28} does not fit at micro-batch 1"
        if v.at is not None:
            head += f": {v.at.describe()}"
        out.append(head)
        if v.above is not None:
            out.append(f"  {'':<28} at {v.micro + 1}: {fmt_bytes(v.above.total)} > {cap}")
        if v.same_because:
            out.append(f"  {'':<28} the same as written: {v.same_because}")
    base = vs[0].micro if not vs[0].refused else None
    better = [v for v in vs[1:] if v.micro and v.micro != base and not v.refused]
    if better:
        out.append("  changes it: " + "; ".join(f"{v.name} -> {v.micro}" for v in better))
    else:
        out.append("  no other layout the plan accepts changes it")
    return out

"""The size of a CPU rehearsal: the target's plan, sized for this CPU.

What makes a rehearsal slow is not the stand-in but the work per step the target was sized for
(micro-batch, accumulation, sequence length, steps, generated tokens).  ``sized_for_this_cpu`` caps
each (``SIZE``; the micro-batch by this machine's cores, ``MICRO_PER_CORE``) and names every cap in
the rehearsal's changes, so a rehearsal states what it ran.  bf16 -> fp32 on a CPU without native
bf16 is ``rehearse.rehearsal_target``'s.  Timing of all targets with these caps: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations


from accelctl.contract.plan import Rehearsal
from accelctl.contract import hostfacts
from accelctl.workload.types import MeasureSpec, TargetSpec, WorkloadSpec
from accelctl.frozen import replace

#: samples per process of a rehearsal's micro-batch, per core of this machine
MICRO_PER_CORE = 2
#: the caps that do not depend on the core count
SIZE = {
    "accumulation": 2,      # the accumulation path runs; 24 micro-batches a step would not
    "seq_len": 128,         # tokens per sequence (the stand-in's positions are 512)
    "target_len": 32,       # seq2seq target tokens
    "prompt_tokens": 32,    # prompt tokens kept of each dataset record (generation)
    "max_new_tokens": 32,   # generated tokens per call
    "inference_steps": 4,   # denoising steps per image batch (diffusion)
    "warmup": 2,            # warm-up steps (compile = on needs 2)
    "steps": 5,             # measured steps
}


def micro_cap(cores: int | None = None) -> int:
    """The largest micro-batch a rehearsal process gets on a machine of ``cores`` cores."""
    return MICRO_PER_CORE * max(1, cores if cores is not None else hostfacts.current().cores)


def _capped(what: str, value: int, cap: int, changes: list[str], unit: str = "") -> int:
    if value > cap:
        changes.append(f"{what} {value} -> {cap}{unit}")
        return cap
    return value


def sized_for_this_cpu(spec: WorkloadSpec, target: TargetSpec, rehearsal: Rehearsal,
                       cores: int | None = None) -> tuple[WorkloadSpec, TargetSpec, Rehearsal]:
    """``spec`` and the rehearsal ``target`` with the work per step capped for this CPU; the
    caps applied, one line, added to ``rehearsal.changes``."""
    changes: list[str] = []
    b = target.batch
    batch = replace(b, micro=_capped("micro-batch", b.micro, micro_cap(cores), changes),
                    accumulation=_capped("accumulation", b.accumulation, SIZE["accumulation"], changes))
    d = spec.dataset
    data = replace(
        d, seq_len=_capped("sequence length", d.seq_len, SIZE["seq_len"], changes, " tokens"),
        target_len=_capped("target length", d.target_len, SIZE["target_len"], changes, " tokens"),
        prompt_tokens=_capped("prompt tokens", d.prompt_tokens, SIZE["prompt_tokens"], changes))
    t = spec.task
    task = replace(
        t, max_new_tokens=_capped("new tokens", t.max_new_tokens, SIZE["max_new_tokens"], changes),
        inference_steps=_capped("denoising steps", t.inference_steps, SIZE["inference_steps"], changes))
    # the measure that applies: the target's own, else the workload's (WorkloadSpec.for_target)
    own = _measure(target.measure, changes) if target.measure is not None else None
    measure = _measure(spec.measure, changes) if own is None else spec.measure
    if not changes:
        return spec, target, rehearsal
    line = f"sized for this CPU ({cores if cores is not None else hostfacts.current().cores} cores): " + ", ".join(changes)
    return (replace(spec, dataset=data, task=task, measure=measure),
            replace(target, batch=batch, measure=own),
            replace(rehearsal, changes=(*rehearsal.changes, line)))


def _measure(m: MeasureSpec, changes: list[str]) -> MeasureSpec:
    warmup = _capped("warm-up steps", m.warmup, SIZE["warmup"], changes)
    steps = _capped("measured steps", m.steps, SIZE["steps"], changes)
    return replace(m, warmup=warmup, steps=steps)

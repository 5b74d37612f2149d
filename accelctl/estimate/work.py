"""Equal work: a job is an amount of samples (or tokens), never a count of optimizer steps.

A target with a 16x larger global batch does 16x fewer optimizer steps for the same job, so
job time = samples / throughput and job cost = job time x price per hour.  ``train_steps``
of a workload are steps at its reference global batch (``reference``: the first target
that is not the host CPU, as the workload declares it), turned into samples once and held
equal on every target.

``parse_work("5e6 samples")``, ``parse_amount("12 h", "time")``: the language's own
quantities (the workload grammar parses them), a positioned diagnostic on bad input.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelctl.dsl import ast
from accelctl.errors import Diagnostic, Span, WorkloadError
from accelctl.catalog import DEVICES

SAMPLE_UNITS = {"sample": "samples", "samples": "samples", "sequences": "samples", "images": "samples",
                "token": "tokens", "tokens": "tokens", "step": "steps", "steps": "steps"}
TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Work:
    amount: float
    #: samples, tokens or steps
    unit: str
    text: str


def _quantity(text: str, option: str) -> ast.Quantity | ast.Num:
    from accelctl.dsl.lalr import parse_text

    prefix = "workload w { x = "
    try:
        v = parse_text(prefix + text + " }", option)[0].items[0].value
    except (WorkloadError, IndexError, AttributeError):
        raise WorkloadError(diagnostics=[_bad(text, option, "not a quantity")]) from None
    if not isinstance(v, (ast.Quantity, ast.Num)) or v.value <= 0:
        raise WorkloadError(diagnostics=[_bad(text, option, "not a positive quantity")])
    return v


def _bad(text: str, option: str, why: str, hint: str = "") -> Diagnostic:
    return Diagnostic("E232", f"{option} {text!r}: {why}", Span.point(1, 1, max(len(text), 1)), option,
                      hint or {"--work": "e.g. --work '5e8 samples', '2e11 tokens', '20000 steps'",
                               "--deadline": "e.g. --deadline '12 h', '90 min'",
                               "--budget": "e.g. --budget '500 usd'"}.get(option, ""), source_line=text)


def parse_work(text: str) -> Work:
    v = _quantity(text, "--work")
    unit = SAMPLE_UNITS.get(getattr(v, "unit", ""))
    if unit is None:
        raise WorkloadError(diagnostics=[_bad(text, "--work", "the work is samples, tokens or steps")])
    return Work(float(v.value), unit, text)


def parse_hours(text: str) -> float:
    v = _quantity(text, "--deadline")
    scale = TIME_UNITS.get(getattr(v, "unit", ""))
    if scale is None:
        raise WorkloadError(diagnostics=[_bad(text, "--deadline", "a deadline is a time: s, min or h")])
    return float(v.value) * scale / 3600.0


def parse_usd(text: str) -> float:
    v = _quantity(text, "--budget")
    if getattr(v, "unit", "usd") != "usd":
        raise WorkloadError(diagnostics=[_bad(text, "--budget", "a budget is in usd")])
    return float(v.value)


def global_batch(target) -> int:
    b = target.batch
    return b.global_size or b.micro * b.accumulation * target.data_parallel


def reference(spec):
    """The target whose global batch the workload's ``train_steps`` count in."""
    for t in spec.targets:
        if not (t.device in DEVICES and DEVICES[t.device].host):
            return t
    return spec.targets[0] if spec.targets else None


def tokens_per_sample(spec) -> int:
    d = spec.dataset
    return (d.seq_len or 0) + (d.target_len or 0 if spec.model.family == "t5" else 0)


def samples_of(work: Work, spec) -> tuple[float | None, str]:
    """The work in samples, and how it was counted (one line for the assumptions)."""
    if work.unit == "samples":
        return work.amount, f"{work.amount:,.0f} samples"
    if work.unit == "tokens":
        per = tokens_per_sample(spec)
        if not per:
            return None, "no tokens per sample (the dataset has no seq_len)"
        return work.amount / per, f"{work.amount:,.0f} tokens / {per} tokens per sample"
    ref = reference(spec)
    if ref is None:
        return None, "no target to count steps in"
    g = global_batch(ref)
    return work.amount * g, (f"{work.amount:,.0f} steps x {g} samples (global batch of target {ref.name}) "
                             f"= {work.amount * g:,.0f} samples")


def job_samples(spec) -> tuple[float | None, str]:
    """The workload's ``train_steps`` as samples (None: no train_steps)."""
    steps = spec.task.train_steps if spec.task.training else 0
    if not steps:
        return None, ""
    return samples_of(Work(float(steps), "steps", f"{steps} steps"), spec)


def job(samples: float | None, throughput: float | None, price: float | None) -> tuple[float | None, float | None]:
    """(hours, usd) of ``samples`` at ``throughput`` samples/s and ``price`` usd/h."""
    if not samples or not throughput:
        return None, None
    hours = samples / throughput / 3600.0
    return hours, (hours * price if price is not None else None)

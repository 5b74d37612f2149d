"""The FP8 rehearsal loop (``accelctl run FILE -t T --rehearse --fp8``): the target's model
trained twice from the same weights on the same batches, once with its FP8 recipe emulated
(``fp8_emulation``) and once in the baseline precision, side by side in one process.

A job is one when it rehearses a target and carries an FP8 recipe while its precision is not
fp8.  It reports both losses and their relative divergence per step, a verdict
(``DIVERGED_ABOVE``) and per FP8 layer whether to keep it in higher precision
(``SATURATED_ABOVE``, ``FLUSHED_ABOVE``, ``OUTPUT_ERROR_ABOVE``); output heads are never
converted.  The thresholds are judgement, set on the tests' models.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any, Callable, Iterator

import torch

from accelctl.workload.types import Fp8Recipe
from accelctl.worker.fp8_emulation import Fp8Linear, convert

#: mean |relative loss divergence| over the last half of the steps above which FP8 "diverged"
DIVERGED_ABOVE = 0.05
#: a layer stays in higher precision when one of these holds (``keep_reasons``)
SATURATED_ABOVE = 0.01    # of an operand's elements clamped at the format maximum
FLUSHED_ABOVE = 0.05     # of an operand's non-zero elements flushed to zero
OUTPUT_ERROR_ABOVE = 0.15  # mean relative error of the layer's output against unquantised operands
HEADER = ("FP8 REHEARSAL (CPU emulation, not an FP8 GPU): {recipe}; exact: FP8 operand values, saturation, "
          "flush-to-zero, delayed-scaling arithmetic; approximate: fp32 GEMM accumulation, per-layer scale "
          "updates, one process")


def wanted(job) -> bool:
    """Whether ``job`` is an FP8 rehearsal (a rehearsal with an FP8 recipe beside a non-fp8 baseline)."""
    return bool(job.rehearsal_of) and job.precision.fp8 is not None and job.precision.dtype != "fp8"


def describe(recipe: Fp8Recipe) -> str:
    fwd_bwd = {"hybrid": "E4M3 forward / E5M2 backward", "e4m3": "E4M3 forward and backward"}[recipe.format]
    return (f"{recipe.format} ({fwd_bwd}), delayed scaling, amax_history {recipe.amax_history}, "
            f"amax_algo {recipe.amax_algo}, margin {recipe.margin}")


def keep_reasons(stats: dict[str, Any]) -> list[str]:
    """Why a layer should stay in higher precision (empty: FP8 is fine for it)."""
    out = []
    for operand in ("input", "weight", "grad_output"):
        s = stats[operand]
        if s["saturated_fraction"] > SATURATED_ABOVE:
            out.append(f"{operand}: {s['saturated_fraction']:.2%} saturated (amax {s['amax_max']:.3g})")
        if s["flushed_fraction"] > FLUSHED_ABOVE:
            out.append(f"{operand}: {s['flushed_fraction']:.2%} of non-zeros flushed to zero "
                       f"(amax {s['amax_max']:.3g})")
    if stats["output_rel_error_mean"] > OUTPUT_ERROR_ABOVE:
        out.append(f"output relative error {stats['output_rel_error_mean']:.1%}")
    return out


def side_by_side(model: torch.nn.Module, recipe: Fp8Recipe, batches: Iterator[Any], steps: int,
                 loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
                 make_optimizer: Callable[[Any], torch.optim.Optimizer],
                 autocast: Callable[[], Any], accumulation: int = 1, grad_clip: float = 0.0,
                 on_step: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train ``model`` (the baseline) and an FP8-emulated deep copy of it on the same batches;
    returns the report (``fp8_rehearsal`` of the summary).  ``autocast()``: the baseline's
    precision context, entered around both forwards (the FP8 layers do their own GEMMs)."""
    fp8_model = copy.deepcopy(model)
    layers, kept = convert(fp8_model, recipe)
    arms = {"baseline": (model, make_optimizer(model.parameters())),
            "fp8": (fp8_model, make_optimizer(fp8_model.parameters()))}
    per_step: list[dict[str, Any]] = []
    non_finite_at = None
    for step in range(1, steps + 1):
        micro = [next(batches) for _ in range(accumulation)]
        losses, times = {}, {}
        for arm, (net, opt) in arms.items():
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            total = 0.0
            for batch in micro:
                with autocast():
                    loss = loss_fn(net, batch)
                (loss / accumulation).backward()
                total += float(loss.detach()) / accumulation
            if grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
            if math.isfinite(total):
                opt.step()
            losses[arm], times[arm] = total, time.perf_counter() - t0
        div = (losses["fp8"] - losses["baseline"]) / max(abs(losses["baseline"]), 1e-12)
        record = {"step": step, "loss_baseline": _finite(losses["baseline"]), "loss_fp8": _finite(losses["fp8"]),
                  "divergence": _finite(div),
                  "step_time_s_fp8": times["fp8"], "step_time_s_baseline": times["baseline"]}
        per_step.append(record)
        if on_step is not None:
            on_step(record)
        if not math.isfinite(losses["fp8"]):
            non_finite_at = step
            break
    return _report(recipe, per_step, layers, kept, non_finite_at)


def _finite(x: float) -> float | None:
    """``x``, or None where it is NaN/inf (the record is JSON)."""
    return x if math.isfinite(x) else None


def _report(recipe: Fp8Recipe, per_step: list[dict[str, Any]], layers: dict[str, Fp8Linear], kept: list[str],
            non_finite_at: int | None) -> dict[str, Any]:
    divs = [abs(r["divergence"]) for r in per_step if r["divergence"] is not None]
    tail = divs[len(divs) // 2:] or divs
    tail_mean = sum(tail) / len(tail) if tail else 0.0
    layer_stats = {name: layer.stats() for name, layer in layers.items()}
    keep = {name: why for name, s in layer_stats.items() if (why := keep_reasons(s))}
    diverged = non_finite_at is not None or tail_mean > DIVERGED_ABOVE
    return {
        "emulation": "cpu", "recipe": {"format": recipe.format, "amax_history": recipe.amax_history,
                                       "amax_algo": recipe.amax_algo, "margin": recipe.margin,
                                       "scaling": "delayed"},
        "steps": per_step,
        "divergence": {"max_abs": max(divs) if divs else None, "final": per_step[-1]["divergence"] if per_step else None,
                       "mean_abs_last_half": tail_mean, "threshold": DIVERGED_ABOVE},
        "non_finite_fp8_loss_at_step": non_finite_at,
        "verdict": "diverged" if diverged else "tracks",
        "layers": layer_stats,
        "keep_higher_precision": keep,
        "kept_by_design": kept,
    }


def summary_lines(report: dict[str, Any], baseline: str) -> list[tuple[str, str]]:
    """(level, line) for the console: the verdict, then each layer to keep in higher precision."""
    d = report["divergence"]
    lines = [("warning" if report["verdict"] == "diverged" else "info",
              f"FP8 rehearsal verdict: {report['verdict']} vs {baseline}: mean |divergence| over the last half "
              f"{d['mean_abs_last_half']:.2%} (threshold {d['threshold']:.0%}), max {d['max_abs'] or 0:.2%}"
              + (f"; FP8 loss not finite at step {report['non_finite_fp8_loss_at_step']}"
                 if report["non_finite_fp8_loss_at_step"] else ""))]
    for name, why in report["keep_higher_precision"].items():
        lines.append(("warning", f"FP8 rehearsal: keep layer {name} in higher precision: " + "; ".join(why)))
    if not report["keep_higher_precision"]:
        lines.append(("info", f"FP8 rehearsal: all {len(report['layers'])} FP8 layers within limits "
                              "(no saturation, flush-to-zero or output error above the thresholds)"))
    return lines


def reports_mfu(job) -> bool:
    """No MFU (and no peak probe): two arms share each step and the FP8 one is emulated."""
    return False


def run(ctx) -> tuple[int, dict]:
    """The worker loop of an FP8 rehearsal (``accelctl.worker.main.pick_loop``)."""
    from accelctl.worker import data, models
    from accelctl.worker.train_loop import forward_loss

    job, adapter, prec = ctx.job, ctx.adapter, ctx.precision
    if ctx.world > 1:
        raise ValueError("an FP8 rehearsal runs both arms in one process; the plan gives it one")
    recipe = job.precision.fp8
    ctx.log("warning", HEADER.format(recipe=describe(recipe)))
    built = models.build(job, ctx.log)
    model = built.model.to(adapter.device).train()
    read = data.training_batches(job, built, ctx.rank, 1, ctx.log)
    batches = iter(read)
    steps = job.measure.warmup + job.measure.steps * job.measure.repeat
    ctx.started({**built.details(), **read.details, "fp8_rehearsal": describe(recipe), "baseline": prec.name})
    ctx.phase("measure")
    samples = job.batch.micro * job.batch.accumulation

    def on_step(r: dict[str, Any]) -> None:
        ctx.step(step=r["step"], phase="measure", step_time_s=r["step_time_s_fp8"], loss=r["loss_fp8"],
                 samples=samples, samples_per_s=samples / max(r["step_time_s_fp8"], 1e-12))
        def show(x, spec):
            return "not finite" if x is None else format(x, spec)

        ctx.log("info", f"FP8 rehearsal step {r['step']}: loss fp8 {show(r['loss_fp8'], '.4f')}, {prec.name} "
                        f"{show(r['loss_baseline'], '.4f')}, divergence {show(r['divergence'], '+.2%')}")

    report = side_by_side(
        model, recipe, ({k: v.to(adapter.device) for k, v in b.items()} for b in batches), steps,
        lambda net, batch: forward_loss(net, built.kind, batch),
        lambda params: adapter.make_optimizer(job.optimizer, params),
        lambda: prec.autocast(adapter), job.batch.accumulation, job.optimizer.grad_clip, on_step)
    report["baseline"] = prec.name
    for level, line in summary_lines(report, prec.name):
        ctx.log(level, line)
    ctx.phase("done")
    last = report["steps"][-1] if report["steps"] else {}
    return len(report["steps"]), {"first_loss": report["steps"][0]["loss_fp8"] if report["steps"] else None,
                                  "final_loss": last.get("loss_fp8"), "samples_per_step": samples,
                                  "fp8_rehearsal": report}

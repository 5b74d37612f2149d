"""What an experiment tracker (MLflow, W&B, TensorBoard) is given of a run, as plain data:
one mapping shared by the exports of stored runs (``accelctl.report.tracking``) and the
runner's live logging (``accelctl.run.tracking``), so both give the tracker the same run.

Names follow HF Trainer's and Lightning's loggers: per-step figures under one prefix per task
kind (``train/*``, ``eval/*``, ``gen/*``; the phase a figure of its own, the x-axis
``<prefix>/global_step``), typed ``run_params`` (``mlflow_params`` for MLflow's text),
``headline_metrics`` (a handful of summary figures; the rest is ``summary.json``, an artifact),
the tags ``RUN_ID_TAG`` and ``SUMMARY_TAG`` that make logging idempotent, and ``MLFLOW_STATUS``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from accelctl.analysis import throughput
from accelctl.run.store import PLAN_FILE, SERIES_FILE, SUMMARY_FILE, WORKLOAD_FILE, read_json

#: the files of a run folder logged as artifacts (those that exist)
ARTIFACT_FILES = (SUMMARY_FILE, PLAN_FILE, WORKLOAD_FILE)
#: the tag that finds an accelctl run again in a tracker (idempotent logging)
RUN_ID_TAG = "accelctl.run_id"
#: the summary's fingerprint: a run whose summary changed (incomplete -> ok) is logged again
SUMMARY_TAG = "accelctl.summary_sha256"
STATUS_TAG = "accelctl.status"
SERIES_TAG = "accelctl.series"
REHEARSAL_TAG = "accelctl.rehearsal_of"
#: the unit of ``summary/throughput`` (samples/s, sequences/s, tokens/s)
UNIT_TAG = "accelctl.throughput_unit"
#: accelctl status -> MLflow run status (anything else: FAILED)
MLFLOW_STATUS = {"ok": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
#: task kind -> the metric set's prefix (HF Trainer's ``train/`` and ``eval/``)
PREFIX = {"generate": "gen", "infer": "eval"}
_DETAIL_KEYS = ("task", "precision", "precision_requested", "micro_batch", "accumulation", "global_batch",
                "family", "model_kind", "params", "data", "seq_len", "weights", "gradient_checkpointing")
_OPTIMIZER_KEYS = {"name": "optimizer", "lr": "lr", "weight_decay": "weight_decay", "grad_clip": "grad_clip",
                   "momentum": "momentum", "betas": "betas", "eps": "eps"}
_PARALLEL_KEYS = ("strategy", "tp", "pp", "zero_stage", "offload")


def metric_prefix(task: str | None) -> str:
    """``train`` / ``eval`` / ``gen``: the prefix of a run's per-step figures."""
    return PREFIX.get(task or "", "train")


def _plain(value: Any) -> Any:
    """A config value a tracker keeps typed: numbers, text, booleans, lists of them."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return json.dumps(value, sort_keys=True, default=str)


def _target(spec: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return next((t for t in spec.get("targets") or () if isinstance(t, Mapping) and t.get("name") == name), {})


def run_params(*, run_id: str, workload: str, target: str, backend: str, engine: str | None, device: str | None,
               world_size: int | None, details: Mapping[str, Any] | None, measure: Mapping[str, Any] | None,
               spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's settings, typed: ``details`` is rank 0's ``RunStarted.details``
    (``summary.json``'s ``details``: what ran), ``spec`` the run folder's ``spec.json`` (the
    optimizer, seed and parallel layout asked for; a target's own optimizer wins)."""
    details, spec = details or {}, spec or {}
    tgt = _target(spec, target)
    params: dict[str, Any] = {"run_id": run_id, "workload": workload, "target": target, "backend": backend,
                              "engine": engine, "device": device, "world_size": world_size}
    params.update({k: details[k] for k in _DETAIL_KEYS if details.get(k) is not None})
    optimizer = tgt.get("optimizer") or spec.get("optimizer") or {}
    params.update({name: optimizer[k] for k, name in _OPTIMIZER_KEYS.items()
                   if isinstance(optimizer, Mapping) and optimizer.get(k) is not None})
    if spec.get("seed") is not None:
        params["seed"] = spec["seed"]
    parallel = tgt.get("parallel") or {}
    params.update({f"parallel.{k}": parallel[k] for k in _PARALLEL_KEYS
                   if isinstance(parallel, Mapping) and parallel.get(k) is not None})
    shape = details.get("shape") or {}
    params.update({f"model.{k}": v for k, v in (shape.items() if isinstance(shape, Mapping) else ())})
    for k, v in (measure or {}).items():
        params[f"measure.{k}"] = v
    return {k: _plain(v) for k, v in params.items() if v is not None}


def mlflow_params(params: Mapping[str, Any]) -> dict[str, str]:
    """``run_params`` as MLflow keeps params (text): numbers as written, never JSON-quoted."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        tree = tree.get(key) if isinstance(tree, Mapping) else None
    return tree if isinstance(tree, (int, float)) and not isinstance(tree, bool) else None


#: the summary figures a tracker gets (``summary/<name>``); the rest is ``summary.json``
HEADLINE_NAMES = ("throughput", "step_time_median_s", "step_time_p90_s", "step_time_mean_s", "step_time_ci_low_s",
                  "step_time_ci_high_s", "measured_steps", "mfu_median", "peak_mem_bytes", "loss_last",
                  "ttft_median_s", "per_token_median_s")


def headline_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """A handful of summary figures (the rest is ``summary.json``, an artifact): the
    throughput every surface shows, the step time, MFU, memory, loss, generation latency."""
    stats = summary.get("stats") if isinstance(summary.get("stats"), Mapping) else {}
    value, _ = throughput.headline(stats, str(summary.get("task") or ""))
    out = {
        "throughput": value,
        "step_time_median_s": _get(stats, "step_time", "median"),
        "step_time_p90_s": _get(stats, "step_time", "p90"),
        "step_time_mean_s": _get(stats, "step_time", "mean"),
        # the mean's 95 % interval (on the log scale: never below zero)
        "step_time_ci_low_s": _get(stats, "step_time_ci", "low"),
        "step_time_ci_high_s": _get(stats, "step_time_ci", "high"),
        "measured_steps": _get(stats, "step_time", "count"),
        "mfu_median": _get(stats, "mfu", "median"),
        "peak_mem_bytes": _get(stats, "peak_mem_bytes"),
        "loss_last": _get(stats, "loss", "last"),
        "ttft_median_s": _get(stats, "generation", "ttft_median_s"),
        "per_token_median_s": _get(stats, "generation", "per_token_median_s"),
    }
    return {k: float(out[k]) for k in HEADLINE_NAMES if out.get(k) is not None}


def throughput_unit(summary: Mapping[str, Any]) -> str:
    stats = summary.get("stats") if isinstance(summary.get("stats"), Mapping) else {}
    return throughput.headline(stats, str(summary.get("task") or ""))[1]


def final_tags(tags: Mapping[str, str], summary: Mapping[str, Any], run_dir: Any) -> dict[str, str]:
    """``tags`` with what a run's end tells: its status, series (``measure { repeat = N }``:
    written after the start), the throughput's unit and the summary's fingerprint."""
    out = {**tags, STATUS_TAG: str(summary.get("status"))}
    series = read_json(run_dir / SERIES_FILE).get("id")
    if series:
        out[SERIES_TAG] = str(series)
    out[UNIT_TAG] = throughput_unit(summary)
    out[SUMMARY_TAG] = summary_fingerprint(summary)
    return out


def wandb_labels(tags: Mapping[str, str]) -> list[str]:
    """A run's W&B tags: its status, and ``rehearsal`` for a CPU rehearsal."""
    return [str(tags.get(STATUS_TAG))] + (["rehearsal"] if REHEARSAL_TAG in tags else [])


def summary_fingerprint(summary: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()


def wandb_run_id(accelctl_run_id: str) -> str:
    """A W&B run id (letters and digits) fixed by the accelctl run id: logging a run again
    (live, then exported) replaces its offline folder instead of adding a second run."""
    return "ac" + hashlib.sha256(accelctl_run_id.encode()).hexdigest()[:14]


def step_row(prefix: str, step: int, wall: float, values: list[tuple[str, float]]) -> dict[str, float]:
    """One ``wandb.log`` row: the figures plus ``<prefix>/global_step`` (accelctl's step
    number, W&B's ``define_metric`` step: W&B's own ``_step`` only counts up from 0) and
    ``_timestamp``, the step's own wall time (W&B keeps it; its ``_runtime`` is its own)."""
    return {f"{prefix}/global_step": step, "_timestamp": wall, **dict(values)}

"""What a stored run gives an experiment tracker (MLflow, W&B): params, per-step metrics,
headline figures and tags, as plain data.  No tracker is imported here.

* ``run_params``: workload, target, backend, engine, device, precision, world size and the
  resolved spec's key settings (batch, optimizer, model, measure), from ``summary.json``.
* ``step_metrics``: per rank-0 step of ``events.jsonl``, the figures TensorBoard gets
  (``accelctl.report.tensorboard.run_scalars``: ``<phase>/step_time_s`` = the straggler's
  time over all ranks, ``<phase>/loss``, ``samples_per_s``, ``tokens_per_s``, ``mfu``,
  ``mem_bytes``...) with the step number and the event's wall time.
* ``headline_metrics``: every number of ``summary.json``'s ``stats``, ``timings`` and
  ``results`` (lists and ``per_rank`` left out), keyed by its path:
  ``stats.step_time.median``, ``stats.throughput.samples_per_s.median``, ...
* ``run_tags``: the accelctl run id, status, series and, for a CPU rehearsal, the target it
  rehearses (``accelctl.rehearsal_of``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from accelctl.run.store import PLAN_FILE, SUMMARY_FILE, WORKLOAD_FILE

#: the files of a run folder logged as artifacts (those that exist)
ARTIFACT_FILES = (SUMMARY_FILE, PLAN_FILE, WORKLOAD_FILE)
#: the tag that finds an accelctl run again in a tracker (idempotent logging)
RUN_ID_TAG = "accelctl.run_id"
#: the summary's fingerprint: a run whose summary changed (incomplete -> ok) is logged again
SUMMARY_TAG = "accelctl.summary_sha256"
_HEADLINE_SECTIONS = ("stats", "timings", "results")
_SPEC_KEYS = ("micro_batch", "global_batch", "accumulation", "optimizer", "family", "model_kind", "params",
              "task", "data", "seq_len", "weights", "gradient_checkpointing", "precision_requested")


def run_params(record: Any) -> dict[str, str]:
    """The run's settings as string params (trackers store params as text)."""
    s = record.summary
    details = s.get("details") or {}
    params: dict[str, Any] = {
        "workload": record.workload, "target": record.target, "backend": record.backend,
        "engine": record.engine or s.get("engine"), "device": s.get("device"),
        "precision": details.get("precision"), "world_size": s.get("world_size"),
    }
    params.update({k: details[k] for k in _SPEC_KEYS if details.get(k) is not None})
    for k, v in (s.get("measure") or {}).items():
        params[f"measure.{k}"] = v
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items() if v is not None}


def step_metrics(record: Any) -> list[tuple[str, float, int, float]]:
    """(key, value, step, wall time s) per figure of each rank-0 step, in event order."""
    from accelctl.report.tensorboard import run_scalars

    scalars = run_scalars(record.events())
    rows = [(tag, value, step, wall) for wall, step, values in scalars for tag, value in values]
    return [r for r in rows if not r[0].startswith("summary/")]


def _numbers(prefix: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        out[prefix] = float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k != "per_rank":
                _numbers(f"{prefix}.{k}", v, out)


def headline_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """Every number of the summary's stats, timings and results, keyed by its path."""
    out: dict[str, float] = {}
    for section in _HEADLINE_SECTIONS:
        _numbers(section, summary.get(section), out)
    return out


def summary_fingerprint(summary: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()


def run_tags(record: Any) -> dict[str, str]:
    tags = {RUN_ID_TAG: record.id, "accelctl.status": record.status,
            SUMMARY_TAG: summary_fingerprint(record.summary)}
    if record.series_id:
        tags["accelctl.series"] = record.series_id
    try:
        plan = record.plan()
    except (KeyError, TypeError, ValueError):  # a plan.json of another shape: no rehearsal tag
        plan = None
    if plan is not None and plan.rehearsal is not None:
        tags["accelctl.rehearsal_of"] = plan.rehearsal.of
    return tags


def artifact_paths(record: Any) -> list:
    return [record.path / name for name in ARTIFACT_FILES if (record.path / name).is_file()]

"""What an experiment tracker (MLflow, W&B, TensorBoard) is given of a run, as plain data:
one mapping shared by the exports of stored runs (``accelctl report --mlflow/--wandb``,
``accelctl.report.tracking``) and the runner's live logging (``accelctl.run.tracking``), so a
run logged live and the same run exported later carry the same names and values.

* ``run_params``: workload, target, backend, engine, device, precision, world size and the
  resolved spec's key settings (batch, optimizer, model, measure) as text params.
* per-step figures: ``accelctl.analysis.scalars`` (``<phase>/step_time_s``, ``<phase>/loss``...).
* ``headline_metrics``: every number of ``summary.json``'s ``stats``, ``timings`` and
  ``results`` (lists and ``per_rank`` left out), keyed by its path
  (``stats.step_time.median``...); trackers get them as ``summary/<path>``.
* tags: the accelctl run id (``RUN_ID_TAG``, which finds the run again: logging is
  idempotent), its status and the summary's fingerprint (``SUMMARY_TAG``).
* ``MLFLOW_STATUS``: the run's status as an MLflow run status.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from accelctl.run.store import PLAN_FILE, SUMMARY_FILE, WORKLOAD_FILE

#: the files of a run folder logged as artifacts (those that exist)
ARTIFACT_FILES = (SUMMARY_FILE, PLAN_FILE, WORKLOAD_FILE)
#: the tag that finds an accelctl run again in a tracker (idempotent logging)
RUN_ID_TAG = "accelctl.run_id"
#: the summary's fingerprint: a run whose summary changed (incomplete -> ok) is logged again
SUMMARY_TAG = "accelctl.summary_sha256"
STATUS_TAG = "accelctl.status"
SERIES_TAG = "accelctl.series"
REHEARSAL_TAG = "accelctl.rehearsal_of"
#: accelctl status -> MLflow run status (anything else: FAILED)
MLFLOW_STATUS = {"ok": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
_HEADLINE_SECTIONS = ("stats", "timings", "results")
_SPEC_KEYS = ("micro_batch", "global_batch", "accumulation", "optimizer", "family", "model_kind", "params",
              "task", "data", "seq_len", "weights", "gradient_checkpointing", "precision_requested")


def run_params(*, workload: str, target: str, backend: str, engine: str | None, device: str | None,
               world_size: int | None, details: Mapping[str, Any] | None,
               measure: Mapping[str, Any] | None) -> dict[str, str]:
    """The run's settings as string params (trackers store params as text); ``details`` is
    rank 0's ``RunStarted.details`` (``summary.json``'s ``details``)."""
    details = details or {}
    params: dict[str, Any] = {
        "workload": workload, "target": target, "backend": backend, "engine": engine, "device": device,
        "precision": details.get("precision"), "world_size": world_size,
    }
    params.update({k: details[k] for k in _SPEC_KEYS if details.get(k) is not None})
    for k, v in (measure or {}).items():
        params[f"measure.{k}"] = v
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items() if v is not None}


def _numbers(prefix: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        out[prefix] = float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k != "per_rank":
                _numbers(f"{prefix}.{k}", v, out)


def headline_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """Every number of the summary's stats, timings and results, keyed by its path."""
    out: dict[str, float] = {}
    for section in _HEADLINE_SECTIONS:
        _numbers(section, summary.get(section), out)
    return out


def summary_fingerprint(summary: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()


def wandb_run_id(accelctl_run_id: str) -> str:
    """A W&B run id (letters and digits) fixed by the accelctl run id: logging a run again
    (live, then exported) replaces its offline folder instead of adding a second run."""
    return "ac" + hashlib.sha256(accelctl_run_id.encode()).hexdigest()[:14]


def wandb_step_row(step: int, wall: float, values: list[tuple[str, float]]) -> dict[str, float]:
    """One ``wandb.log`` row: the figures plus ``step`` (accelctl's step number) and
    ``time_unix_s`` (W&B's own step only counts up, and ``repeat`` runs repeat step numbers)."""
    return {"step": step, "time_unix_s": wall, **dict(values)}

"""What a stored run gives an experiment tracker (MLflow, W&B): params, per-step metrics,
headline figures and tags, as plain data.  No tracker is imported here.

The mapping itself is ``accelctl.run.tracking.fields`` (and ``accelctl.analysis.scalars`` for
the per-step figures), shared with the runner's live logging (``track { ... }``): this module
applies it to a stored run (``accelctl.run.store.RunRecord``).

* ``run_params``: every hyperparameter and the model's dimensions, typed, from
  ``summary.json`` and ``spec.json`` (``fields.run_params``).
* ``step_metrics``: per rank-0 step of ``events.jsonl``, the figures every tracker gets
  (``train/step_time_s`` = the straggler's time over all ranks, ``train/phase``,
  ``train/loss``, ``samples_per_s``, ``tokens_per_s``, ``mfu``, ``mem_bytes``...; ``eval/``
  and ``gen/`` for inference and generation) with the step number and the event's wall time.
* ``step_rows``: the same grouped per step, as the trackers are given them.
* ``headline_metrics``: the handful of summary figures (``fields.headline_metrics``).
* ``run_tags``: the accelctl run id, status, series, the throughput's unit and, for a CPU
  rehearsal, the target it rehearses (``accelctl.rehearsal_of``).
"""

from __future__ import annotations

from typing import Any

from accelctl.analysis.scalars import run_scalars
from accelctl.run.store import SPEC_FILE, read_json
from accelctl.run.tracking import fields
from accelctl.run.tracking.fields import (ARTIFACT_FILES, RUN_ID_TAG, SUMMARY_TAG, headline_metrics,
                                          summary_fingerprint)

__all__ = ["ARTIFACT_FILES", "RUN_ID_TAG", "SUMMARY_TAG", "artifact_paths", "headline_metrics", "prefix_of",
           "run_params", "run_tags", "step_metrics", "step_rows", "summary_fingerprint"]


def run_params(record: Any) -> dict[str, Any]:
    """The run's settings, typed (``fields.run_params``)."""
    s = record.summary
    return fields.run_params(run_id=record.id, workload=record.workload, target=record.target,
                             backend=record.backend, engine=record.engine or s.get("engine"), device=s.get("device"),
                             world_size=s.get("world_size"), details=s.get("details"), measure=s.get("measure"),
                             spec=read_json(record.path / SPEC_FILE))


def prefix_of(record: Any) -> str:
    return fields.metric_prefix(str(record.summary.get("task") or ""))


def step_rows(record: Any) -> list[tuple[int, float, list[tuple[str, float]]]]:
    """(step, wall time s, [(key, value)]) per rank-0 step, in event order."""
    return [(step, wall, values) for wall, step, values in run_scalars(record.events(), prefix_of(record))]


def step_metrics(record: Any) -> list[tuple[str, float, int, float]]:
    """(key, value, step, wall time s) per figure of each rank-0 step, in event order."""
    return [(tag, value, step, wall) for step, wall, values in step_rows(record) for tag, value in values]


def run_tags(record: Any) -> dict[str, str]:
    tags = {RUN_ID_TAG: record.id}
    try:
        plan = record.plan()
    except (KeyError, TypeError, ValueError):  # a plan.json of another shape: no rehearsal tag
        plan = None
    if plan is not None and plan.rehearsal is not None:
        tags[fields.REHEARSAL_TAG] = plan.rehearsal.of
    return fields.final_tags(tags, {**record.summary, "status": record.status}, record.path)


def artifact_paths(record: Any) -> list:
    return [record.path / name for name in ARTIFACT_FILES if (record.path / name).is_file()]

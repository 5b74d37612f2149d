"""What a stored run gives an experiment tracker (MLflow, W&B): params, per-step metrics,
headline figures and tags, as plain data.  No tracker is imported here.

The mapping itself is ``accelctl.run.tracking.fields`` (and ``accelctl.analysis.scalars`` for
the per-step figures), shared with the runner's live logging (``track { ... }``): this module
applies it to a stored run (``accelctl.run.store.RunRecord``).

* ``run_params``: workload, target, backend, engine, device, precision, world size and the
  resolved spec's key settings (batch, optimizer, model, measure), from ``summary.json``.
* ``step_metrics``: per rank-0 step of ``events.jsonl``, the figures TensorBoard gets
  (``<phase>/step_time_s`` = the straggler's time over all ranks, ``<phase>/loss``,
  ``samples_per_s``, ``tokens_per_s``, ``mfu``, ``mem_bytes``...) with the step number and
  the event's wall time.
* ``headline_metrics``: every number of ``summary.json``'s ``stats``, ``timings`` and
  ``results`` (lists and ``per_rank`` left out), keyed by its path:
  ``stats.step_time.median``, ``stats.throughput.samples_per_s.median``, ...
* ``run_tags``: the accelctl run id, status, series and, for a CPU rehearsal, the target it
  rehearses (``accelctl.rehearsal_of``).
"""

from __future__ import annotations

from typing import Any

from accelctl.analysis.scalars import run_scalars
from accelctl.run.tracking import fields
from accelctl.run.tracking.fields import (ARTIFACT_FILES, RUN_ID_TAG, SUMMARY_TAG, headline_metrics,
                                          summary_fingerprint)

__all__ = ["ARTIFACT_FILES", "RUN_ID_TAG", "SUMMARY_TAG", "artifact_paths", "headline_metrics", "run_params",
           "run_tags", "step_metrics", "summary_fingerprint"]


def run_params(record: Any) -> dict[str, str]:
    """The run's settings as string params (trackers store params as text)."""
    s = record.summary
    return fields.run_params(workload=record.workload, target=record.target, backend=record.backend,
                             engine=record.engine or s.get("engine"), device=s.get("device"),
                             world_size=s.get("world_size"), details=s.get("details"), measure=s.get("measure"))


def step_metrics(record: Any) -> list[tuple[str, float, int, float]]:
    """(key, value, step, wall time s) per figure of each rank-0 step, in event order."""
    scalars = run_scalars(record.events())
    rows = [(tag, value, step, wall) for wall, step, values in scalars for tag, value in values]
    return [r for r in rows if not r[0].startswith("summary/")]


def run_tags(record: Any) -> dict[str, str]:
    tags = {RUN_ID_TAG: record.id, fields.STATUS_TAG: record.status,
            SUMMARY_TAG: summary_fingerprint(record.summary)}
    if record.series_id:
        tags[fields.SERIES_TAG] = record.series_id
    try:
        plan = record.plan()
    except (KeyError, TypeError, ValueError):  # a plan.json of another shape: no rehearsal tag
        plan = None
    if plan is not None and plan.rehearsal is not None:
        tags[fields.REHEARSAL_TAG] = plan.rehearsal.of
    return tags


def artifact_paths(record: Any) -> list:
    return [record.path / name for name in ARTIFACT_FILES if (record.path / name).is_file()]

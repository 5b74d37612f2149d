"""Live logging of a run to experiment trackers, from the runner (``track { ... }``).

A workload's ``track`` block reaches the plan as ``Plan.tracking`` (``accelctl.plan.tracking``).
``launch`` refuses to start when a tracker's library cannot be imported (``check_available``:
E594, never a silent skip), makes a ``TrackingSink`` (``start_tracking``) fed every event the
runner reads -- the worker logs nothing: no tracker on its hot path -- and, once ``summary.json``
is written, has it log the summary, artifacts and final status, then records where the run went
(``tracking``) and any tracker's failure (``warnings``).  Modules: ``fields`` (shared with
``accelctl report``), ``mlflow_store``, ``backends``, ``sink``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelctl.contract.plan import Plan
from accelctl.errors import RunError
from accelctl.plan.tracking import local_ranks, missing_message, tracks_here
from accelctl.run.tracking import fields
from accelctl.run.tracking.backends import MlflowLive, RunInfo, TensorboardLive, WandbLive
from accelctl.run.tracking.sink import TrackingSink

__all__ = ["TrackingSink", "check_available", "start_tracking"]


def check_available(plan: Plan, only=None) -> None:
    """Raise ``RunError`` (E594) when the plan tracks to a library this Python lacks (and this
    runner, starting the launches ``only``, is the one that logs: ``tracks_here``)."""
    if not tracks_here(plan, only):
        return
    message = missing_message(plan.tracking)
    if message is not None:
        raise RunError(message)


def start_tracking(plan: Plan, run_dir: Path, started_unix_s: float, only=None,
                   **kwargs: Any) -> TrackingSink | None:
    """The live tracking sink of a run of ``plan`` started by a runner that starts the launches
    ``only`` (None: all); None when the plan tracks nothing or another runner logs the run (one
    runner per node: the one of the launch with rank 0, ``accelctl.plan.tracking.tracks_here``).
    Its thread opens the trackers at once, off the caller's thread."""
    track = plan.tracking
    if track is None or not tracks_here(plan, only):
        return None
    kwargs.setdefault("local_ranks", local_ranks(plan, only))
    experiment = track.experiment or plan.workload
    backends: list[Any] = []
    if track.mlflow:
        backends.append(MlflowLive(track.mlflow, experiment))
    if track.wandb:
        backends.append(WandbLive(track.wandb, run_dir))
    if track.tensorboard:
        backends.append(TensorboardLive(run_dir, track.tensorboard_dir))
    tags = {fields.RUN_ID_TAG: run_dir.name, fields.STATUS_TAG: "running"}
    if plan.rehearsal is not None:
        tags[fields.REHEARSAL_TAG] = plan.rehearsal.of
    info = RunInfo(run_id=run_dir.name, run_dir=run_dir, workload=plan.workload,
                   experiment=experiment, started_unix_s=started_unix_s, tags=tags,
                   prefix=fields.metric_prefix(plan.job.task.kind))
    measure = {"warmup": plan.job.measure.warmup, "steps": plan.job.measure.steps, "repeat": plan.job.measure.repeat}
    plan_fields = {"workload": plan.workload, "target": plan.target, "backend": plan.backend, "engine": plan.engine,
                   "device": plan.device}
    return TrackingSink(info, backends, measure=measure, plan_fields=plan_fields, **kwargs)

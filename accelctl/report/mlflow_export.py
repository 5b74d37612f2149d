"""MLflow export of stored runs (``accelctl report RUN... --mlflow [URI]``), through MLflow's
own client (``mlflow.tracking.MlflowClient``, from ``mlflow-skinny``).

Each accelctl run becomes one MLflow run in the experiment named after its workload (or its
``track { experiment = ... }``, where it was logged live: that MLflow run is found again):
params and tags from ``accelctl.report.tracking``, the per-step metrics of ``events.jsonl``
(step number and the event's wall time), the summary's headline figures as metrics at the
last step, and ``summary.json``, ``plan.json`` and ``workload.wl`` as artifacts.  Start and
end times are the run's; its MLflow status is FINISHED (ok), KILLED (stopped) or FAILED.

The store: ``URI``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<cwd>/mlruns/mlflow.db``
with artifacts in ``./mlruns/artifacts``.  sqlite, not ``file:``: MLflow 3 deprecates the
file store, and one database file takes concurrent writers safely.  A URI without a scheme
is a folder that gets that same layout.  Idempotent: an accelctl run is found again by its
``accelctl.run_id`` tag; with the same summary it is skipped, with a changed summary (it was
incomplete, now it ended) the old MLflow run is deleted and the run logged anew, so the
store never holds two live MLflow runs of one accelctl run.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from accelctl.report.tracking import (SUMMARY_TAG, artifact_paths, headline_metrics, run_params, run_tags,
                                      step_rows)
from accelctl.run.tracking import writers
from accelctl.run.tracking.fields import MLFLOW_STATUS
from accelctl.run.tracking.mlflow_store import experiment_id, quiet, resolve_uri, runs_of

__all__ = ["export_runs", "log_run", "resolve_uri"]


def experiment_of(record: Any) -> str:
    """The experiment of a stored run: its workload's ``track { experiment = ... }`` where it
    was logged live (so the export finds that MLflow run), else the workload's name."""
    try:
        plan = record.plan()
    except (KeyError, TypeError, ValueError, OSError):
        plan = None
    tracking = getattr(plan, "tracking", None)
    return (tracking.experiment if tracking is not None and tracking.experiment else "") or record.workload


def log_run(client: Any, record: Any, artifacts: Path | None = None) -> tuple[str, str]:
    """Log one stored run; returns (MLflow run id, "logged" | "skipped" | "replaced").  Whole or
    not at all: a failure on the way (the disk filled) deletes the MLflow run begun, its local
    artifacts and the experiment made for it; an earlier MLflow run of the record is deleted
    only once the new one is complete."""
    name = experiment_of(record)
    made = client.get_experiment_by_name(name) is None
    # its artifact folder, where this call is the one to make it
    new_folder = artifacts / name if made and artifacts is not None and not (artifacts / name).exists() else None
    exp_id, run = None, None
    try:
        exp_id = experiment_id(client, name, artifacts)
        tags = run_tags(record)
        found = runs_of(client, exp_id, record.id)
        if found and found[0].data.tags.get(SUMMARY_TAG) == tags[SUMMARY_TAG]:
            return found[0].info.run_id, "skipped"
        s = record.summary
        start_ms = int(float(s.get("started_unix_s") or 0) * 1000) or None
        run = client.create_run(exp_id, start_time=start_ms, tags=tags, run_name=record.id)
        rid = run.info.run_id
        writers.mlflow_params(client, rid, run_params(record))
        rows = step_rows(record)
        last_step, last_wall = (rows[-1][0], rows[-1][1]) if rows else (0, (start_ms or 0) / 1000)
        rows.append((last_step, last_wall, [(f"summary/{k}", v) for k, v in headline_metrics(s).items()]))
        writers.mlflow_metrics(client, rid, rows)
        for path in artifact_paths(record):
            client.log_artifact(rid, str(path))
        end_ms = int(float(s["finished_unix_s"]) * 1000) if s.get("finished_unix_s") else None
        client.set_terminated(rid, status=MLFLOW_STATUS.get(record.status, "FAILED"), end_time=end_ms)
        for old in found:
            client.delete_run(old.info.run_id)
    except BaseException:
        _discard(client, run, exp_id if made else None, new_folder)
        raise
    return rid, "replaced" if found else "logged"


def _discard(client: Any, run: Any, exp_id: str | None, exp_artifacts: Path | None) -> None:
    """Best effort, after a failed ``log_run``: delete the run begun (and its artifacts, where
    they are local files) and the experiment made for it (and its artifact folder)."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    if run is not None:
        _quietly(client.delete_run, run.info.run_id)
        uri = urlparse(run.info.artifact_uri or "")
        if uri.scheme == "file":
            folder = Path(url2pathname(uri.path))
            shutil.rmtree(folder.parent if folder.parent.name == run.info.run_id else folder, ignore_errors=True)
    if exp_id is not None:
        _quietly(client.delete_experiment, exp_id)
    if exp_artifacts is not None:
        shutil.rmtree(exp_artifacts, ignore_errors=True)


def _quietly(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the store failed already: that first failure is the one reported
        pass


def export_runs(records: list, uri: str | None) -> tuple[str, list[tuple[Any, str, str]]]:
    """Log ``records`` to the store at ``uri`` (see ``resolve_uri``); returns the URI used and
    (record, MLflow run id, what was done) per run."""
    from mlflow.tracking import MlflowClient

    quiet()
    # its ERROR line and traceback of a failed write: the failure is raised, and reported once
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    tracking_uri, artifacts = resolve_uri(uri)
    client = MlflowClient(tracking_uri=tracking_uri)
    return tracking_uri, [(r, *log_run(client, r, artifacts)) for r in records]

"""An MLflow tracking store as accelctl uses it, through MLflow's own client
(``mlflow.tracking.MlflowClient``): shared by the export of stored runs
(``accelctl.report.mlflow_export``) and the runner's live logging; MLflow is imported by the
callers, never at import.  ``resolve_uri`` (``URI``, else ``$MLFLOW_TRACKING_URI``, else sqlite in
``./mlruns``: MLflow 3 deprecates the file store, and one database file takes concurrent writers),
``experiment_id`` (created or restored where needed), ``runs_of`` (by the ``accelctl.run_id`` tag).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from accelctl.run.tracking.fields import RUN_ID_TAG

DEFAULT_DIR = "mlruns"
DB_NAME = "mlflow.db"
#: MLflow's log_batch limits: 1000 metrics, 100 params per call
METRICS_PER_BATCH = 1000
PARAMS_PER_BATCH = 100


def resolve_uri(uri: str | None) -> tuple[str, Path | None]:
    """(tracking URI, local artifact root or None): ``uri``, ``$MLFLOW_TRACKING_URI``, or a
    sqlite database in ``./mlruns``; a scheme-less ``uri`` is a folder for that layout."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_DIR
    if "://" not in uri and not uri.startswith(("file:", "databricks")):
        folder = Path(uri).expanduser().absolute()
        folder.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{folder / DB_NAME}", folder / "artifacts"
    if uri.startswith("sqlite:///"):
        return uri, Path(uri[len("sqlite:///"):]).absolute().parent / "artifacts"
    return uri, None


def experiment_id(client: Any, name: str, artifacts: Path | None) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return exp.experiment_id
    location = (artifacts / name).as_uri() if artifacts is not None else None
    return client.create_experiment(name, artifact_location=location)


def runs_of(client: Any, exp_id: str, accelctl_run_id: str) -> list:
    return client.search_runs([exp_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{accelctl_run_id}'")


def quiet() -> None:
    """MLflow's INFO lines (creating the sqlite tables...) would interleave with accelctl's output."""
    import logging

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)

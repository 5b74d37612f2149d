"""The trackers the runner logs to live (``track { ... }``), each through its own library,
each called only from the tracking thread (``accelctl.run.tracking.sink``).

A backend has ``start(info)``, ``params(dict)``, ``steps(batch)`` and ``finish(summary, run_dir)``;
what each writes is ``accelctl.run.tracking.writers``, shared with the exports.  Any may raise: the
sink then reports that tracker once and stops calling it.  ``MlflowLive`` (the MLflow run named and
tagged after the accelctl run, an earlier one of the same run deleted first), ``WandbLive``
(offline, its id derived from the run id) and ``TensorboardLive`` (``<run folder>/tensorboard``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelctl.run.tracking import fields, writers


@dataclass
class RunInfo:
    run_id: str
    run_dir: Path
    workload: str
    experiment: str
    started_unix_s: float
    tags: dict[str, str] = field(default_factory=dict)
    #: the per-step figures' prefix: train, eval, gen (``fields.metric_prefix``)
    prefix: str = "train"


class MlflowLive:
    name = "mlflow"

    def __init__(self, uri: str, experiment: str):
        self.uri = uri
        self.experiment = experiment
        self.client: Any = None
        self.run_id = ""
        self._last = (0, 0.0)  # (step, wall time) of the last step logged: where the headline goes

    def where(self) -> dict[str, str]:
        return {"uri": self.uri, "experiment": self.experiment}

    def start(self, info: RunInfo) -> None:
        from mlflow.tracking import MlflowClient

        from accelctl.run.tracking.mlflow_store import experiment_id, quiet, resolve_uri, runs_of

        quiet()
        uri, artifacts = resolve_uri(self.uri)
        self.client = MlflowClient(tracking_uri=uri)
        exp_id = experiment_id(self.client, info.experiment, artifacts)
        for old in runs_of(self.client, exp_id, info.run_id):
            self.client.delete_run(old.info.run_id)
        run = self.client.create_run(exp_id, start_time=int(info.started_unix_s * 1000), tags=info.tags,
                                     run_name=info.run_id)
        self.run_id = run.info.run_id

    def params(self, params: dict[str, Any]) -> None:
        writers.mlflow_params(self.client, self.run_id, params)

    def steps(self, rows: list[tuple[int, float, list[tuple[str, float]]]]) -> None:
        writers.mlflow_metrics(self.client, self.run_id, rows)
        if rows:
            self._last = (rows[-1][0], rows[-1][1])

    def finish(self, summary: dict[str, Any], run_dir: Path) -> None:
        step, wall = self._last
        writers.mlflow_metrics(self.client, self.run_id, [(step, wall, [
            (f"summary/{k}", v) for k, v in fields.headline_metrics(summary).items()])])
        for name in fields.ARTIFACT_FILES:
            if (run_dir / name).is_file():
                self.client.log_artifact(self.run_id, str(run_dir / name))
        for key, value in fields.final_tags({}, summary, run_dir).items():
            self.client.set_tag(self.run_id, key, value)
        end = summary.get("finished_unix_s")
        self.client.set_terminated(self.run_id, status=fields.MLFLOW_STATUS.get(summary.get("status"), "FAILED"),
                                   end_time=int(float(end) * 1000) if end else None)

    def close(self) -> None:
        pass


class WandbLive:
    name = "wandb"

    def __init__(self, project: str, run_dir: Path):
        self.project = project
        self.run: Any = None
        self.info: RunInfo | None = None
        #: the offline runs go to <dir>/wandb/offline-run-<time>-<id>/
        self.dir = Path(os.environ.get("WANDB_DIR") or run_dir).expanduser().absolute()

    def where(self) -> dict[str, str]:
        return {"project": self.project, "dir": str(self.dir), "sync": f"wandb sync {self.dir / 'wandb'}"}

    def start(self, info: RunInfo) -> None:
        self.info = info  # the run opens with its params (typed config from the start, as the export's)

    def params(self, params: dict[str, Any]) -> None:
        info = self.info
        if self.run is None and info is not None:
            self.run = writers.wandb_open(project=self.project, run_id=info.run_id, group=info.experiment,
                                          out_dir=self.dir, params=params, tags=info.tags, prefix=info.prefix)
        else:
            self.run.config.update(params, allow_val_change=True)

    def steps(self, rows: list[tuple[int, float, list[tuple[str, float]]]]) -> None:
        for step, wall, values in rows:
            self.run.log(fields.step_row(self.info.prefix, step, wall, values))

    def finish(self, summary: dict[str, Any], run_dir: Path) -> None:
        if self.run is None:  # the run never told its params (it did not start)
            return
        writers.wandb_finish(self.run, summary, run_dir, fields.final_tags(self.info.tags, summary, run_dir))

    def close(self) -> None:
        """End wandb's service process (and with it the run's stream: the offline files are
        complete after this)."""
        import wandb

        wandb.teardown()


class TensorboardLive:
    name = "tensorboard"

    def __init__(self, run_dir: Path, folder: str = "") -> None:
        self.writer: Any = None
        #: ``<run folder>/tensorboard``, or ``DIR/<run id>`` (``run --tensorboard DIR``, as the export's)
        self.folder = Path(folder) / run_dir.name if folder else run_dir / "tensorboard"
        self._last = (0, 0.0)
        self._started = 0.0

    def where(self) -> dict[str, str]:
        return {"dir": str(self.folder)}

    def start(self, info: RunInfo) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.writer = EventFileWriter(str(self.folder))
        self._started = info.started_unix_s

    def params(self, params: dict[str, Any]) -> None:
        writers.tb_hparams(self.writer, params, self._started)

    def steps(self, rows: list[tuple[int, float, list[tuple[str, float]]]]) -> None:
        for step, wall, values in rows:
            writers.tb_scalars(self.writer, step, wall, values)
        if rows:
            self._last = (rows[-1][0], rows[-1][1])

    def finish(self, summary: dict[str, Any], run_dir: Path) -> None:
        writers.tb_finish(self.writer, summary, *self._last)
        self.writer.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

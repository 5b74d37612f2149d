"""The trackers the runner logs to live (``track { ... }``), each through its own library,
each called only from the tracking thread (``accelctl.run.tracking.sink``).

A backend has ``start(info)`` (open the run: ``info`` is a ``RunInfo``), ``params(dict)``,
``steps([(step, wall time s, [(tag, value)])])`` (a batch, in order) and
``finish(summary, run_dir)`` (headline figures, artifacts, final status, close).  Any of them
may raise: the sink then reports that tracker once and stops calling it.

* ``MlflowLive``: ``MlflowClient`` on the workload's URI (``mlflow_store``); the MLflow run is
  named after the accelctl run and tagged with its id, so ``accelctl report --mlflow`` finds
  it again (and skips it while the summary is unchanged); an earlier MLflow run of the same
  accelctl run (a resumed run) is deleted first, as the export does.
* ``WandbLive``: ``wandb.init(mode="offline")`` under ``$WANDB_DIR``, else the run folder;
  the W&B run id is derived from the accelctl run id (``fields.wandb_run_id``).
* ``TensorboardLive``: TensorBoard's own ``EventFileWriter`` into ``<run folder>/tensorboard``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelctl.run.store import SERIES_FILE, read_json
from accelctl.run.tracking import fields


@dataclass
class RunInfo:
    run_id: str
    run_dir: Path
    workload: str
    experiment: str
    started_unix_s: float
    tags: dict[str, str] = field(default_factory=dict)


class MlflowLive:
    name = "mlflow"

    def __init__(self, uri: str, experiment: str):
        self.uri = uri
        self.experiment = experiment
        self.client: Any = None
        self.run_id = ""
        self._last = (0, 0)  # (step, ms) of the last step logged: where the headline goes

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

    def params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        from accelctl.run.tracking.mlflow_store import PARAMS_PER_BATCH

        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[i:i + PARAMS_PER_BATCH])

    def _metrics(self, metrics: list) -> None:
        from accelctl.run.tracking.mlflow_store import METRICS_PER_BATCH

        for i in range(0, len(metrics), METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + METRICS_PER_BATCH])

    def steps(self, rows: list[tuple[int, float, list[tuple[str, float]]]]) -> None:
        from mlflow.entities import Metric

        self._metrics([Metric(tag, value, int(wall * 1000), step) for step, wall, values in rows
                       for tag, value in values])
        if rows:
            self._last = (rows[-1][0], int(rows[-1][1] * 1000))

    def finish(self, summary: dict[str, Any], run_dir: Path) -> None:
        from mlflow.entities import Metric

        step, ms = self._last
        self._metrics([Metric(f"summary/{k}", v, ms, step) for k, v in fields.headline_metrics(summary).items()])
        for name in fields.ARTIFACT_FILES:
            if (run_dir / name).is_file():
                self.client.log_artifact(self.run_id, str(run_dir / name))
        self.client.set_tag(self.run_id, fields.STATUS_TAG, str(summary.get("status")))
        series = read_json(run_dir / SERIES_FILE).get("id")  # measure { repeat = N }: written after the start
        if series:
            self.client.set_tag(self.run_id, fields.SERIES_TAG, str(series))
        self.client.set_tag(self.run_id, fields.SUMMARY_TAG, fields.summary_fingerprint(summary))
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
        #: the offline runs go to <dir>/wandb/offline-run-<time>-<id>/
        self.dir = Path(os.environ.get("WANDB_DIR") or run_dir).expanduser().absolute()

    def where(self) -> dict[str, str]:
        return {"project": self.project, "dir": str(self.dir), "sync": f"wandb sync {self.dir / 'wandb'}"}

    def start(self, info: RunInfo) -> None:
        import wandb

        rid = fields.wandb_run_id(info.run_id)
        for old in sorted((self.dir / "wandb").glob(f"offline-run-*-{rid}")):
            shutil.rmtree(old)
        self.run = wandb.init(project=self.project, name=info.run_id, id=rid, group=info.experiment,
                              dir=str(self.dir), mode="offline", config={"accelctl": dict(info.tags)},
                              job_type="accelctl-run",
                              settings=wandb.Settings(silent=True, console="off", save_code=False,
                                                      x_disable_stats=True, x_disable_machine_info=True))

    def params(self, params: dict[str, str]) -> None:
        self.run.config.update(params, allow_val_change=True)

    def steps(self, rows: list[tuple[int, float, list[tuple[str, float]]]]) -> None:
        for step, wall, values in rows:
            self.run.log(fields.wandb_step_row(step, wall, values))

    def finish(self, summary: dict[str, Any], run_dir: Path) -> None:
        self.run.summary.update({f"summary/{k}": v for k, v in fields.headline_metrics(summary).items()})
        self.run.config.update({"accelctl": {fields.STATUS_TAG: summary.get("status"),
                                             fields.SUMMARY_TAG: fields.summary_fingerprint(summary)}},
                               allow_val_change=True)
        self.run.finish(exit_code=0 if summary.get("status") == "ok" else 1)

    def close(self) -> None:
        """End wandb's service process (and with it the run's stream: the offline files are
        complete after this)."""
        import wandb

        wandb.teardown()


class TensorboardLive:
    name = "tensorboard"

    def __init__(self, run_dir: Path) -> None:
        self.writer: Any = None
        self.folder = run_dir / "tensorboard"
        self._last = (0, 0.0)

    def where(self) -> dict[str, str]:
        return {"dir": str(self.folder)}

    def start(self, info: RunInfo) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.writer = EventFileWriter(str(self.folder))

    def params(self, params: dict[str, str]) -> None:
        pass

    def _add(self, step: int, wall: float, values: list[tuple[str, float]]) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2

        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)
                                             for tag, value in values])
        self.writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))

    def steps(self, rows: list[tuple[int, float, list[tuple[str, float]]]]) -> None:
        for step, wall, values in rows:
            self._add(step, wall, values)
        if rows:
            self._last = (rows[-1][0], rows[-1][1])

    def finish(self, summary: dict[str, Any], run_dir: Path) -> None:
        self._add(*self._last, [(f"summary/{k}", v) for k, v in fields.headline_metrics(summary).items()])
        self.writer.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

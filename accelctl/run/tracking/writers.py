"""How a run is written into each tracker, through the tracker's own library: one code path
for the runner's live logging (``accelctl.run.tracking.backends``) and the exports of stored
runs (``accelctl.report``), so both give the tracker the same run.  The libraries are imported
by these functions, never at import.

W&B (offline only): ``wandb_open`` / ``wandb_finish``, every figure stepped on
``<prefix>/global_step`` as HF Trainer does; TensorBoard: ``tb_scalars`` and ``tb_hparams`` (the
HPARAMS plugin's protos, no TensorFlow needed); MLflow: ``mlflow_params`` / ``mlflow_metrics`` in
MLflow's batch sizes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Mapping

from accelctl.run.tracking import fields

_WANDB_SETTINGS = {"silent": True, "console": "off", "save_code": False, "x_disable_stats": True,
                   "x_disable_machine_info": True}


# ----------------------------------------------------------------------------- W&B


def wandb_offline_dirs(out_dir: Path, rid: str) -> list[Path]:
    return sorted((out_dir / "wandb").glob(f"offline-run-*-{rid}"))


def wandb_open(*, project: str, run_id: str, group: str, out_dir: Path, params: Mapping[str, Any],
               tags: Mapping[str, str], prefix: str) -> Any:
    """An offline W&B run for the accelctl run ``run_id``; an earlier offline folder of it is
    replaced (its W&B id is fixed by the accelctl run id: ``wandb sync`` uploads one run)."""
    import wandb

    rid = fields.wandb_run_id(run_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in wandb_offline_dirs(out_dir, rid):
        shutil.rmtree(old)
    run = wandb.init(project=project, name=run_id, id=rid, group=group, dir=str(out_dir), mode="offline",
                     config={**params, "accelctl": dict(tags)}, job_type="accelctl-run",
                     settings=wandb.Settings(**_WANDB_SETTINGS))
    run.define_metric(f"{prefix}/global_step")
    run.define_metric(f"{prefix}/*", step_metric=f"{prefix}/global_step")
    run.define_metric("summary/*", step_metric=f"{prefix}/global_step")
    return run


def wandb_finish(run: Any, summary: Mapping[str, Any], run_dir: Path, tags: Mapping[str, str]) -> None:
    """The run's end: its accelctl tags (status, summary fingerprint...) in the config, its
    status (and ``rehearsal``) as W&B tags, the headline figures, ``summary.json``."""
    run.config.update({"accelctl": dict(tags)}, allow_val_change=True)
    run.tags = tuple(fields.wandb_labels(tags))
    run.summary.update({f"summary/{k}": v for k, v in fields.headline_metrics(summary).items()})
    if (run_dir / fields.SUMMARY_FILE).is_file():  # the run's own files (wandb would symlink and warn)
        kept = Path(run.dir) / fields.SUMMARY_FILE
        shutil.copyfile(run_dir / fields.SUMMARY_FILE, kept)
        run.save(str(kept), base_path=run.dir, policy="now")
    run.finish(exit_code=0 if summary.get("status") == "ok" else 1)


def wandb_settings_problem() -> str | None:
    """Why the ``WANDB_*`` variables of this environment make W&B refuse to start (an empty
    ``WANDB_SILENT=``...), naming the variable; None when they are fine or wandb is absent."""
    import os

    try:
        import wandb
    except ImportError:
        return None
    try:
        wandb.Settings().update_from_env_vars(dict(os.environ))
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, or wandb's own
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        name = f"WANDB_{loc.upper()}" if loc else "a WANDB_* variable"
        got = first.get("input", "")
        return f"{name}={got!s}: {first.get('msg') or ' '.join(str(exc).split())[:200]}"
    return None


# ----------------------------------------------------------------------------- TensorBoard


def tb_scalars(writer: Any, step: int, wall: float, values: list[tuple[str, float]]) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)
                                         for tag, value in values])
    writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))


def _tb_plugin_event(tag: str, data: Any, wall: float) -> Any:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.hparams import metadata, plugin_data_pb2

    content = plugin_data_pb2.HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **data)
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name=metadata.PLUGIN_NAME, content=content.SerializeToString()))
    return event_pb2.Event(wall_time=wall, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=tag, metadata=meta)]))


def tb_hparams(writer: Any, params: Mapping[str, Any], wall: float) -> None:
    """The HPARAMS dashboard's experiment (its hyperparameters and the ``summary/*`` figures
    as its metrics) and this run's session start, with its values."""
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    params = dict(sorted(params.items()))  # one order, however the run's details were ordered
    start = plugin_data_pb2.SessionStartInfo(start_time_secs=wall)
    for key, value in params.items():
        if isinstance(value, bool):
            start.hparams[key].bool_value = value
        elif isinstance(value, (int, float)):
            start.hparams[key].number_value = float(value)
        else:
            start.hparams[key].string_value = str(value)
    experiment = api_pb2.Experiment(
        hparam_infos=[api_pb2.HParamInfo(name=k) for k in params],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=f"summary/{k}"))
                      for k in fields.HEADLINE_NAMES])
    writer.add_event(_tb_plugin_event(metadata.EXPERIMENT_TAG, {"experiment": experiment}, wall))
    writer.add_event(_tb_plugin_event(metadata.SESSION_START_INFO_TAG, {"session_start_info": start}, wall))


def tb_finish(writer: Any, summary: Mapping[str, Any], step: int, wall: float) -> None:
    """The headline figures at the last step, then the HPARAMS session's end and status."""
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    tb_scalars(writer, step, wall, [(f"summary/{k}", v) for k, v in fields.headline_metrics(summary).items()])
    status = api_pb2.STATUS_SUCCESS if summary.get("status") == "ok" else api_pb2.STATUS_FAILURE
    end = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=float(summary.get("finished_unix_s") or wall))
    writer.add_event(_tb_plugin_event(metadata.SESSION_END_INFO_TAG, {"session_end_info": end}, wall))


# ----------------------------------------------------------------------------- MLflow


def mlflow_params(client: Any, rid: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    from accelctl.run.tracking.mlflow_store import PARAMS_PER_BATCH

    items = [Param(k, v) for k, v in fields.mlflow_params(params).items()]
    for i in range(0, len(items), PARAMS_PER_BATCH):
        client.log_batch(rid, params=items[i:i + PARAMS_PER_BATCH])


def mlflow_metrics(client: Any, rid: str, rows: list[tuple[int, float, list[tuple[str, float]]]]) -> None:
    """(step, wall time s, [(key, value)]) rows as MLflow metrics at that step and time."""
    from mlflow.entities import Metric

    from accelctl.run.tracking.mlflow_store import METRICS_PER_BATCH

    metrics = [Metric(key, float(value), int(wall * 1000), step) for step, wall, values in rows
               for key, value in values]
    for i in range(0, len(metrics), METRICS_PER_BATCH):
        client.log_batch(rid, metrics=metrics[i:i + METRICS_PER_BATCH])

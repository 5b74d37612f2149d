"""`track { mlflow = ... wandb = ... tensorboard = on }` on a real CPU run (`accelctl run`):
logged live by the runner into a tmp sqlite MLflow store, W&B offline files and a TensorBoard
event file, each read back through its own reader -- MLflow's client, the `.wandb` records
(wandb's protobufs), TensorBoard's event loader -- and equal to the run's events and
`summary.json`, under the same names and values as `accelctl report --mlflow/--wandb` gives
the stored run (which then finds the live MLflow run and skips it).  A second real run whose
sqlite store cannot be created completes `ok`, with one tracking warning in its summary."""

from __future__ import annotations

import json

import pytest
from wandb_offline import item_key, read_records

from accelctl.cli import main
from accelctl.contract.events import StepMetrics
from accelctl.report.tracking import headline_metrics, run_params, step_metrics
from accelctl.run.store import list_runs
from accelctl.run.tracking.fields import RUN_ID_TAG, mlflow_params

pytestmark = pytest.mark.slow  # two real CPU runs (a few seconds each)

WORKLOAD = """\
workload tiny_live {{
  task pretrain {{ objective = classification }}
  model vit(layers = 1, hidden = 32, heads = 2, image_size = 16, patch = 8, classes = 10)
  dataset synthetic(image_size = 16, channels = 3, classes = 10)
  optimizer sgd(lr = 0.01)
  precision fp32
  batch {{ micro = 4 }}
  measure {{ warmup = 1 step  steps = 5 steps }}
  track {{ {track} }}
  target cpu {{ devices = 1  threads = 1 }}
}}
"""


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("live")
    mp = pytest.MonkeyPatch()
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("WANDB_DIR", str(root / "wandb-dir"))
    (root / "wandb-dir").mkdir()
    wl = root / "tiny_live.wl"
    # a relative sqlite path: beside the workload file
    wl.write_text(WORKLOAD.format(track='mlflow = "sqlite:///store/mlflow.db"  wandb = "live-proj"  '
                                        'experiment = "tiny-exp"  tensorboard = on'), encoding="utf-8")
    runs = root / "runs"
    try:
        assert main(["run", str(wl), "--headless", "--runs-dir", str(runs)]) == 0
    finally:
        mp.undo()
    (record,) = list_runs(runs)
    return root, runs, record


def test_mlflow_live_run_equals_the_events_and_summary(live_run, capsys):
    from mlflow.tracking import MlflowClient

    root, runs, record = live_run
    uri = f"sqlite:///{root / 'store' / 'mlflow.db'}"
    summary = json.loads((record.path / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["tracking"]["mlflow"] == {"uri": uri, "experiment": "tiny-exp"}
    assert not [w for w in summary["warnings"] if w.startswith("tracking")], summary["warnings"]
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("tiny-exp").experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags[RUN_ID_TAG] == record.id
    assert run.data.params == mlflow_params(run_params(record))
    assert run.data.params["precision"] == "fp32" and run.data.params["world_size"] == "1"
    # per step: the worker's own figures, at its step number and time
    steps = [e for e in record.events() if isinstance(e, StepMetrics)]
    assert [e.phase for e in steps] == ["warmup"] + ["measure"] * 5
    for field in ("step_time_s", "loss", "samples_per_s", "mem_bytes"):
        history = client.get_metric_history(run.info.run_id, f"train/{field}")
        mine = [e for e in steps if getattr(e, field) is not None]
        assert mine, field
        assert [(m.step, m.timestamp) for m in history] == [(e.step, int(e.time_unix_s * 1000)) for e in mine]
        assert [m.value for m in history] == pytest.approx([float(getattr(e, field)) for e in mine], rel=1e-12)
    # every figure the export of the stored run gives, and nothing else
    logged = sorted((k, m.value, m.step) for k in run.data.metrics if not k.startswith("summary/")
                    for m in client.get_metric_history(run.info.run_id, k))
    assert logged == sorted((k, v, s) for k, v, s, _ in step_metrics(record))
    headline = {k[len("summary/"):]: v for k, v in run.data.metrics.items() if k.startswith("summary/")}
    assert headline == pytest.approx(headline_metrics(summary), rel=1e-12)
    assert headline["step_time_median_s"] == pytest.approx(summary["stats"]["step_time"]["median"])
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"summary.json", "plan.json", "workload.wl"}
    got = json.loads((root / "store" / "artifacts").joinpath(
        "tiny-exp", run.info.run_id, "artifacts", "summary.json").read_text())
    assert got == summary
    # the export finds the run logged live (its experiment, tag and summary fingerprint) and leaves it
    capsys.readouterr()
    assert main(["report", record.id, "--runs-dir", str(runs), "-f", "md", "--mlflow", uri]) == 0
    assert "mlflow: skipped" in capsys.readouterr().err
    assert len(client.search_runs([client.get_experiment_by_name("tiny-exp").experiment_id])) == 1


def test_wandb_offline_live_run_equals_the_events_and_summary(live_run):
    root, runs, record = live_run
    summary = json.loads((record.path / "summary.json").read_text())
    assert summary["tracking"]["wandb"]["dir"] == str(root / "wandb-dir")
    (folder,) = (root / "wandb-dir" / "wandb").glob("offline-run-*")
    (wfile,) = folder.glob("*.wandb")
    recs = read_records(wfile)
    run = next(r.run for r in recs if r.WhichOneof("record_type") == "run")
    assert run.project == "live-proj" and run.display_name == record.id and run.run_group == "tiny-exp"
    rows = [{item_key(i): json.loads(i.value_json) for i in r.history.item}
            for r in recs if r.WhichOneof("record_type") == "history"]
    expected: dict[tuple[int, float], dict[str, float]] = {}
    for key, value, step, wall in step_metrics(record):
        expected.setdefault((step, wall), {"train/global_step": step})[key] = value
    assert [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows] == \
        [pytest.approx(e, rel=1e-12) for e in expected.values()]
    logged = {}
    for r in recs:
        if r.WhichOneof("record_type") == "summary":
            logged.update({item_key(i): json.loads(i.value_json) for i in r.summary.update})
    headline = {k[len("summary/"):]: v for k, v in logged.items() if k.startswith("summary/")}
    assert headline == pytest.approx(headline_metrics(summary), rel=1e-12)
    config = {item_key(i): json.loads(i.value_json) for i in run.config.update}  # typed from wandb.init on
    for r in recs:
        if r.WhichOneof("record_type") == "config":
            config.update({item_key(i): json.loads(i.value_json) for i in r.config.update})
    assert {k: config[k] for k in run_params(record)} == run_params(record)


def test_tensorboard_live_event_file_equals_the_events(live_run):
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto.event_pb2 import Event

    root, runs, record = live_run
    (path,) = (record.path / "tensorboard").glob("events.out.tfevents.*")
    events = [Event.FromString(raw) for raw in RawEventFileLoader(str(path)).Load()][1:]
    scalars = [(ev.step, v.tag, v.simple_value) for ev in events for v in ev.summary.value
               if not v.tag.startswith(("summary/", "_hparams_/"))]
    assert scalars == [(s, k, pytest.approx(v, rel=1e-6)) for k, v, s, _ in step_metrics(record)]


def test_a_store_that_cannot_be_created_leaves_the_run_ok_with_one_warning(tmp_path, capsys):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    wl = tmp_path / "tiny_live.wl"
    wl.write_text(WORKLOAD.format(track=f'mlflow = "sqlite:///{not_a_folder}/mlflow.db"'), encoding="utf-8")
    runs = tmp_path / "runs"
    assert main(["run", str(wl), "--headless", "--runs-dir", str(runs)]) == 0
    (record,) = list_runs(runs)
    summary = json.loads((record.path / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["failure"] is None
    tracking = [w for w in summary["warnings"] if w.startswith("tracking")]
    assert len(tracking) == 1 and "mlflow failed" in tracking[0] and "report --mlflow" in tracking[0]
    assert summary["tracking"] == {}
    out = capsys.readouterr().out
    assert f"accelctl: tracking: MLflow sqlite:///{not_a_folder}/mlflow.db" in out  # where, said at the start
    assert "  tracking: mlflow failed (start: " in out  # and the failure, in the end-of-run summary
    assert [e.step for e in record.events() if isinstance(e, StepMetrics)] == [1, 2, 3, 4, 5, 6]

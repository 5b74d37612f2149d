"""`accelctl report --mlflow` and `--wandb` on two real tiny CPU runs: logged to a local
sqlite MLflow store and read back through MLflow's own client; logged to W&B offline and
read back from the offline run's `.wandb` file (its records parsed with wandb's protobufs).
Figures must equal summary.json's, per-step histories the events' step counts, and logging
twice must leave two runs, not four."""

from __future__ import annotations

import json

import pytest
from wandb_offline import item_key as _key
from wandb_offline import read_records as _wandb_records

from accelctl.cli import main
from accelctl.contract.events import StepMetrics
from accelctl.report.tracking import RUN_ID_TAG, headline_metrics
from accelctl.run.store import list_runs

pytestmark = pytest.mark.slow  # two real CPU runs (a few seconds each)

WORKLOAD = """\
workload tiny_track {
  task pretrain { objective = classification }
  model vit(layers = 1, hidden = 32, heads = 2, image_size = 16, patch = 8, classes = 10)
  dataset synthetic(image_size = 16, channels = 3, classes = 10)
  optimizer sgd(lr = 0.01)
  precision fp32
  batch { micro = 4 }
  measure { warmup = 1 step  steps = 5 steps }
  target cpu { devices = 1  threads = 1 }
}
"""


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("track")
    wl = root / "tiny_track.wl"
    wl.write_text(WORKLOAD, encoding="utf-8")
    runs = root / "runs"
    for _ in range(2):
        assert main(["run", str(wl), "--target", "cpu", "--runs-dir", str(runs)]) == 0
    records = list_runs(runs)
    assert len(records) == 2 and {r.status for r in records} == {"ok"}
    return runs, records


def _rank0_steps(record, phase: str) -> int:
    return sum(1 for e in record.events() if isinstance(e, StepMetrics) and e.rank == 0 and e.phase == phase)


def test_mlflow_sqlite_store_reads_back_the_summary(two_runs, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    runs, records = two_runs
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = [r.id for r in records]
    for _ in range(2):  # the second time finds both runs by their tag and skips them
        assert main(["report", *ids, "--runs-dir", str(runs), "-f", "md", "--mlflow", uri]) == 0
    assert capsys.readouterr().err.count("mlflow: skipped") == 2

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("tiny_track")
    found = client.search_runs([exp.experiment_id])
    assert len(found) == 2 and {f.data.tags[RUN_ID_TAG] for f in found} == set(ids)
    for f in found:
        record = next(r for r in records if r.id == f.data.tags[RUN_ID_TAG])
        assert f.info.status == "FINISHED" and f.info.run_name == record.id
        assert f.data.params["workload"] == "tiny_track" and f.data.params["target"] == "cpu"
        assert f.data.params["world_size"] == "1" and f.data.params["precision"] == "fp32"
        assert f.data.tags["accelctl.status"] == "ok"
        # a handful of headline figures (summary.json, an artifact, has the rest)
        expected = headline_metrics(json.loads((record.path / "summary.json").read_text()))
        assert expected["step_time_median_s"] == record.summary["stats"]["step_time"]["median"]
        logged = {k[len("summary/"):]: v for k, v in f.data.metrics.items() if k.startswith("summary/")}
        assert logged == pytest.approx(expected, rel=1e-12)
        # per-step histories: one point per rank-0 step of events.jsonl, with its step number
        rid = f.info.run_id
        # one train/* set over warm-up and measured steps, the phase its own figure
        assert _rank0_steps(record, "warmup") == 1 and _rank0_steps(record, "measure") == 5
        assert [m.value for m in client.get_metric_history(rid, "train/phase")] == [0.0] + [1.0] * 5
        assert len(client.get_metric_history(rid, "train/loss")) == 6
        steps = [e for e in record.events() if isinstance(e, StepMetrics)]
        history = client.get_metric_history(rid, "train/step_time_s")
        assert [m.step for m in history] == [e.step for e in steps]
        assert [m.value for m in history] == pytest.approx([e.step_time_s for e in steps])
        assert [m.timestamp for m in history] == [int(e.time_unix_s * 1000) for e in steps]
        artifacts = {a.path for a in client.list_artifacts(rid)}
        assert artifacts == {"summary.json", "plan.json", "workload.wl"}


def test_mlflow_bad_store_is_one_line(two_runs, tmp_path, capsys):
    runs, records = two_runs
    code = main(["report", records[0].id, "--runs-dir", str(runs), "-f", "md", "--mlflow", "nosuchscheme://x"])
    err = capsys.readouterr().err
    # a URI MLflow refuses is the user's setting: exit 2 naming it, before the table
    assert code == 2 and "--mlflow nosuchscheme://x: MLflow cannot use this store" in err and "Traceback" not in err


def test_wandb_bad_folder_is_one_line(two_runs, tmp_path, capsys):
    runs, records = two_runs
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    code = main(["report", records[0].id, "--runs-dir", str(runs), "-f", "md", "--wandb", "--wandb-dir",
                 str(not_a_folder)])
    err = capsys.readouterr().err
    assert code == 1 and err == f"accelctl: error: --wandb-dir: cannot export to {not_a_folder}: " \
        "Not a directory (ENOTDIR)\n"


def test_wandb_offline_reads_back_the_summary(two_runs, tmp_path, capsys):
    runs, records = two_runs
    ids = [r.id for r in records]
    for _ in range(2):  # the second time replaces each run's offline folder
        assert main(["report", *ids, "--runs-dir", str(runs), "-f", "md", "--wandb", "accelctl-test",
                     "--wandb-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "wandb sync " in err
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(folders) == 2
    for folder in folders:
        (wfile,) = folder.glob("*.wandb")
        recs = _wandb_records(wfile)
        run = next(r.run for r in recs if r.WhichOneof("record_type") == "run")
        record = next(r for r in records if r.id == run.display_name)
        assert run.project == "accelctl-test"
        history = [r.history for r in recs if r.WhichOneof("record_type") == "history"]
        rows = [{_key(i): json.loads(i.value_json) for i in h.item} for h in history]
        measured = [row for row in rows if row.get("train/phase") == 1]
        assert len(measured) == _rank0_steps(record, "measure") == 5
        steps = [e for e in record.events() if isinstance(e, StepMetrics) and e.phase == "measure"]
        assert [row["train/global_step"] for row in measured] == [e.step for e in steps]
        assert [row["train/step_time_s"] for row in measured] == pytest.approx([e.step_time_s for e in steps])
        summary = {}
        for r in recs:
            if r.WhichOneof("record_type") == "summary":
                summary.update({_key(i): json.loads(i.value_json) for i in r.summary.update})
        expected = headline_metrics(record.summary)
        logged = {k[len("summary/"):]: v for k, v in summary.items() if k.startswith("summary/")}
        assert logged == pytest.approx(expected, rel=1e-12)


def test_mlflow_changed_summary_replaces_the_run(two_runs, tmp_path, capsys):
    """A run logged before its summary changed (e.g. incomplete, then finished by the next
    reader) is logged anew, and the earlier MLflow run deleted: one live run per accelctl run."""
    import shutil

    from mlflow.tracking import MlflowClient

    from accelctl.run.store import load_run

    runs, records = two_runs
    store = tmp_path / "runs"
    shutil.copytree(records[0].path, store / records[0].id)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["report", records[0].id, "--runs-dir", str(store), "-f", "md", "--mlflow", uri]) == 0
    summary_path = store / records[0].id / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["stats"]["step_time"]["median"] += 1.0
    summary_path.write_text(json.dumps(summary))
    assert main(["report", records[0].id, "--runs-dir", str(store), "-f", "md", "--mlflow", uri]) == 0
    assert "mlflow: replaced" in capsys.readouterr().err
    client = MlflowClient(tracking_uri=uri)
    (live,) = client.search_runs([client.get_experiment_by_name("tiny_track").experiment_id])
    assert live.data.metrics["summary/step_time_median_s"] == pytest.approx(summary["stats"]["step_time"]["median"])
    assert live.data.tags[RUN_ID_TAG] == load_run(records[0].id, store).id


def test_repeat_rounds_go_on_counting_in_the_trackers():
    """A ``measure { repeat = 2 }`` run numbers each round's steps from 0; trackers get one
    step axis (MLflow would otherwise stack the rounds on the same step numbers)."""
    from accelctl.analysis.scalars import TrackerSteps
    from accelctl.contract.events import StepMetrics

    number = TrackerSteps()
    seen = [number(StepMetrics(step=i, phase=phase, step_time_s=0.1, repeat=r))
            for phase, r, i in [("warmup", 0, 0), ("warmup", 0, 1), ("measure", 0, 0), ("measure", 0, 1),
                                ("measure", 0, 2), ("measure", 1, 0), ("measure", 1, 1), ("measure", 1, 2)]]
    assert seen == [0, 1, 2, 3, 4, 5, 6, 7]  # one train/* set: warm-up and rounds on one step axis

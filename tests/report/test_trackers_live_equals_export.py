"""Issue 27 items 1-2 on one real tiny CPU run, started as a user would:
``accelctl run tiny.wl --mlflow URI --wandb PROJECT --tensorboard DIR`` (W&B offline), then the
same stored run exported with ``accelctl report --mlflow/--wandb/--tensorboard`` into other
stores.  Each tracker's copies are read back with the tracker's own reader -- MLflow's client
on an sqlite store, the offline ``.wandb`` records through wandb's protobufs (wandb ships no
reader of offline runs), TensorBoard's ``EventAccumulator`` -- and must be the same run:
one ``train/*`` metric set with ``train/phase``, the step from 1, typed params with every
hyperparameter and the model's dimensions, a handful of summary figures.  Then every
surface -- ``runs``, ``report``, ``compare``, the end-of-run summary, the TUI's Runs table,
run summary and comparison, and the trackers' ``summary/throughput`` -- shows the same
throughput figure and unit."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from tiny_workload import write_workload
from wandb_offline import item_key, read_records

from accelctl.analysis import throughput
from accelctl.cli import main
from accelctl.contract.events import StepMetrics
from accelctl.run.store import list_runs

pytestmark = pytest.mark.slow  # a real CPU run and three trackers' exports (~40 s)

@pytest.fixture(scope="module")
def both(tmp_path_factory):
    root = tmp_path_factory.mktemp("trk")
    wl = write_workload(root, "tiny_trk", optimizer="adamw(lr = 0.003, weight_decay = 0.01, grad_clip = 1.0)",
                        extra="seed = 7")
    runs = root / "runs"
    mp = pytest.MonkeyPatch()
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("WANDB_DIR", str(root / "live-wandb"))
    mp.setenv("WANDB_PROJECT", "trk-proj")  # --wandb without PROJECT takes it
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'live.db'}")  # --mlflow without URI takes it
    mp.chdir(root)
    try:
        assert main(["run", str(wl), "--headless", "--runs-dir", str(runs), "--mlflow", "--wandb",
                     "--tensorboard", str(root / "live-tb")]) == 0
        (record,) = list_runs(runs)
        assert main(["report", record.id, "--runs-dir", str(runs), "-f", "md", f"--mlflow=sqlite:///{root / 'exp.db'}",
                     "--wandb=trk-proj", "--wandb-dir", str(root / "exp-wandb"),
                     "--tensorboard", str(root / "exp-tb")]) == 0
    finally:
        mp.undo()
    return root, runs, record


def _mlflow_run(uri: str, experiment: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    history = {k: [(m.step, m.timestamp, m.value) for m in client.get_metric_history(run.info.run_id, k)]
               for k in run.data.metrics}
    tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
    artifacts = sorted(a.path for a in client.list_artifacts(run.info.run_id))
    return run, history, tags, artifacts


def test_mlflow_live_and_exported_runs_are_the_same(both):
    root, runs, record = both
    live, live_hist, live_tags, live_art = _mlflow_run(f"sqlite:///{root / 'live.db'}", "tiny_trk")
    exp, exp_hist, exp_tags, exp_art = _mlflow_run(f"sqlite:///{root / 'exp.db'}", "tiny_trk")
    assert live.data.params == exp.data.params
    assert live_hist == exp_hist and live_tags == exp_tags and live_art == exp_art
    assert (live.info.status, live.info.start_time, live.info.end_time, live.info.run_name) == \
        (exp.info.status, exp.info.start_time, exp.info.end_time, exp.info.run_name)
    # one train/* set, the phase its own figure, accelctl's step numbers from 1
    assert not [k for k in live_hist if k.startswith(("warmup/", "measure/"))]
    assert [(s, v) for s, _, v in live_hist["train/phase"]] == [(1, 0.0)] + [(s, 1.0) for s in range(2, 7)]
    assert [s for s, _, _ in live_hist["train/loss"]] == [1, 2, 3, 4, 5, 6]
    # every hyperparameter and the model's dimensions; numbers written as numbers, never JSON strings
    p = live.data.params
    assert (p["optimizer"], p["lr"], p["weight_decay"], p["grad_clip"], p["seed"]) == ("adamw", "0.003", "0.01", "1.0", "7")
    assert (p["micro_batch"], p["global_batch"], p["world_size"], p["precision"]) == ("4", "4", "1", "fp32")
    assert (p["model.hidden"], p["model.layers"], p["model.heads"], p["parallel.strategy"]) == ("32", "1", "2", "none")
    assert p["run_id"] == record.id
    # a handful of summary figures; summary.json (the rest) an artifact
    assert 4 <= len([k for k in live_hist if k.startswith("summary/")]) <= 12
    assert "summary.json" in live_art and live_tags["accelctl.throughput_unit"] == "samples/s"


def _wandb_offline(folder):
    (wfile,) = folder.glob("wandb/offline-run-*/*.wandb")
    recs = read_records(wfile)
    kinds = {}
    for r in recs:
        kinds.setdefault(r.WhichOneof("record_type"), []).append(r)
    run = kinds["run"][-1].run
    config = {item_key(i): json.loads(i.value_json) for i in run.config.update if item_key(i) != "_wandb"}
    for r in kinds.get("config", []):
        config.update({item_key(i): json.loads(i.value_json) for i in r.config.update})
    rows = [{item_key(i): json.loads(i.value_json) for i in r.history.item if item_key(i) != "_runtime"}
            for r in kinds["history"]]
    summary = {}
    for r in kinds.get("summary", []):
        summary.update({item_key(i): json.loads(i.value_json) for i in r.summary.update})
    metrics = sorted(str(r.metric).replace("\n", " ") for r in kinds.get("metric", []))
    files = sorted(f.path for r in kinds.get("files", []) for f in r.files.files)
    return run, config, rows, summary, metrics, files


def test_wandb_live_and_exported_offline_runs_are_the_same(both):
    root, runs, record = both
    live = _wandb_offline(root / "live-wandb")
    exp = _wandb_offline(root / "exp-wandb")
    (lrun, lconfig, lrows, lsummary, lmetrics, lfiles), (erun, econfig, erows, esummary, emetrics, efiles) = live, exp
    assert (lrun.project, lrun.display_name, lrun.run_group, lrun.run_id, list(lrun.tags)) == \
        (erun.project, erun.display_name, erun.run_group, erun.run_id, list(erun.tags)) == \
        ("trk-proj", record.id, "tiny_trk", lrun.run_id, ["ok"])
    assert lconfig == econfig and lrows == erows and lmetrics == emetrics and lfiles == efiles
    keep = {k: v for k, v in lsummary.items() if not k.startswith("_")}
    assert keep == {k: v for k, v in esummary.items() if not k.startswith("_")}
    # typed config: numbers as numbers
    assert (lconfig["lr"], lconfig["seed"], lconfig["world_size"], lconfig["model.hidden"]) == (0.003, 7, 1, 32)
    assert lconfig["run_id"] == record.id and lconfig["accelctl"]["accelctl.status"] == "ok"
    # the x-axis is accelctl's step (define_metric), from 1; _timestamp the step's own time
    assert any('glob_name: "train/*" step_metric: "train/global_step"' in m for m in lmetrics)
    steps = [e for e in record.events() if isinstance(e, StepMetrics)]
    assert [(r["train/global_step"], r["_timestamp"]) for r in lrows] == [(e.step, e.time_unix_s) for e in steps]
    assert "summary.json" in lfiles


def _tensorboard(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    scalars = {t: [(e.step, e.wall_time, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    hparams = acc.PluginTagToContent("hparams")
    return scalars, hparams


def test_tensorboard_live_and_exported_event_files_are_the_same(both):
    from tensorboard.plugins.hparams import plugin_data_pb2

    root, runs, record = both
    live_scalars, live_hp = _tensorboard(root / "live-tb" / record.id)
    exp_scalars, exp_hp = _tensorboard(root / "exp-tb" / record.id)
    # the hparams plug-in's content is a protobuf whose maps serialise in an order of the writing
    # process's own (the live writer is the run's supervisor): equal as messages, not as bytes
    def decoded(hparams):
        return {tag: plugin_data_pb2.HParamsPluginData.FromString(data) for tag, data in hparams.items()}

    assert live_scalars == exp_scalars and decoded(live_hp) == decoded(exp_hp)
    assert set(live_hp) == {"_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"}
    assert [s for s, _, _ in live_scalars["train/step_time_s"]] == [1, 2, 3, 4, 5, 6]
    start = plugin_data_pb2.HParamsPluginData.FromString(live_hp["_hparams_/session_start_info"])
    hp = start.session_start_info.hparams
    assert (hp["lr"].number_value, hp["optimizer"].string_value, hp["model.hidden"].number_value) == (0.003, "adamw", 32)


def test_every_surface_shows_the_same_throughput(both, capsys, monkeypatch):
    from rich.console import Console

    # the tables' width in a pipe is $COLUMNS when set: an xdist worker's (80) wrapped the figure
    monkeypatch.setenv("COLUMNS", "200")

    from accelctl.tui.app import AccelctlApp
    from accelctl.tui.screens.compare import CompareScreen

    root, runs, record = both
    summary = json.loads((record.path / "summary.json").read_text())
    value, unit = throughput.headline(summary["stats"], "pretrain")
    steps = sorted(e.samples_per_s for e in record.events()
                   if isinstance(e, StepMetrics) and e.phase == "measure")
    assert value == pytest.approx(steps[2]) and unit == "samples/s"  # the median of the 5 measured steps
    shown = throughput.text(value, unit)
    capsys.readouterr()
    for argv in (["runs"], ["report", "-f", "md"], ["compare", record.id, record.id, "--force"]):
        main([*argv, "--runs-dir", str(runs)])
        out = capsys.readouterr().out
        assert shown in out, (argv, out)
    from accelctl.run.viewers.console import summary_rows

    assert ("throughput", f"{shown} (median of the measured steps)") in summary_rows(summary)

    async def tui() -> list[str]:
        app = AccelctlApp(root, runs_root=runs)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("4")
            await pilot.pause()
            table = app.screen.query_one("DataTable")
            cells = [str(c) for c in table.get_row_at(0)]
            app.push_screen(CompareScreen(record, record))
            await pilot.pause()
            console = Console(width=160, file=io.StringIO(), color_system=None)
            console.print(app.screen.query_one("#cmp-a").content)  # what the comparison's side A shows
            return [*cells, console.file.getvalue()]

    got = asyncio.run(tui())
    assert any(shown == c for c in got[:-1]), got
    assert shown in got[-1]
    # the trackers' summary figure is the same number, its unit a tag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'live.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("tiny_trk").experiment_id])
    assert run.data.metrics["summary/throughput"] == pytest.approx(value, rel=1e-12)

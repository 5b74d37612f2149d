"""One runner per node (``accelctl run --launch NAME``): only the runner of the launch that
starts rank 0 logs the run to the trackers -- one MLflow / W&B run per run, not one per node --
and only its machine needs the trackers' libraries.  Checked on a real two-node torchrun plan
(compiled from a workload) and with real runs of the launches apart (``fake_worker.py``
processes, a real sqlite MLflow store read back through MLflow's client)."""

from __future__ import annotations

import json
import sys
import time

import pytest

from accelctl import api
from accelctl.contract.events import RunStarted, StepMetrics
from accelctl.contract.plan import Launch
from accelctl.errors import RunError
from accelctl.plan.tracking import local_ranks, logging_launch, tracks_here
from accelctl.run.supervision import runner
from accelctl.run.tracking import check_available, start_tracking
from accelctl.workload.types import TrackSpec
from accelctl.frozen import replace

TWO_NODES = """
workload tr2 {
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 32 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1 }
  measure { warmup = 1 steps  steps = 3 steps }
  track { mlflow = "sqlite:///TMP/mlflow.db"  wandb = "nodes" }
  target two { device = cpu  devices = 2  nodes = 2  threads = 1  parallel = ddp  engine = torchrun }
}
"""


def _two_node_plan(tmp_path):
    specs, diags = api.validate_text(TWO_NODES.replace("TMP", str(tmp_path)))
    assert not diags, diags
    return api.plan(specs[0], "two")


def test_the_rank_0_launch_of_a_two_node_plan_is_the_one_that_logs(tmp_path):
    p = _two_node_plan(tmp_path)
    assert [ln.name for ln in p.launches] == ["node0", "node1"] and p.tracking.enabled
    assert logging_launch(p) == "node0"
    assert tracks_here(p) and tracks_here(p, ["node0"]) and tracks_here(p, ["node1", "node0"])
    assert not tracks_here(p, ["node1"])
    assert local_ranks(p) is None and local_ranks(p, ["node0"]) == 2 and local_ranks(p, ["node0", "node1"]) == 4
    assert start_tracking(p, tmp_path, time.time(), ["node1"]) is None
    assert not tracks_here(replace(p, tracking=None), ["node0"])


def test_a_wait_pass_before_the_ranks_does_not_log(tmp_path):
    p = _two_node_plan(tmp_path)
    compile_pass = Launch(name="precompile", argv=("true",), wait=True)
    p = replace(p, launches=(compile_pass, *p.launches))
    assert logging_launch(p) == "node0" and not tracks_here(p, ["precompile"])


def test_only_the_logging_node_needs_the_tracker_libraries(tmp_path, monkeypatch):
    p = _two_node_plan(tmp_path)
    monkeypatch.setitem(sys.modules, "wandb", None)  # how Python marks a module not importable
    check_available(p, ["node1"])  # node 1 logs nothing: it needs no wandb
    with pytest.raises(RunError, match="E594"):
        check_available(p, ["node0"])
    specs, _ = api.validate_text(TWO_NODES.replace("TMP", str(tmp_path)))
    assert api.tracking_blocker(specs[0], p, ["node1"]) is None
    assert api.tracking_blocker(specs[0], p, ["node0"]).code == "E594"


def test_a_node_runner_releases_steps_once_its_own_ranks_reported_them(tmp_path):
    """Node 0's runner sees ranks 0 and 1 of a world of 4: a step reaches the trackers when those
    two reported it (live), not at the end of the run waiting for ranks it never sees."""
    p = replace(_two_node_plan(tmp_path), tracking=TrackSpec(tensorboard=True, experiment="tr2"))
    sink = start_tracking(p, tmp_path, time.time(), ["node0"])
    try:
        for rank in (0, 1):
            sink.on_event(RunStarted(run_id="r", workload="tr2", target="two", backend="torchrun", rank=rank,
                                     world_size=4))
        for rank in (0, 1):
            sink.on_event(StepMetrics(step=1, phase="measure", step_time_s=0.01 * (rank + 1), rank=rank))
        deadline = time.monotonic() + 30
        while not list((tmp_path / "tensorboard").glob("events.out.tfevents.*")) or \
                b"train/step_time_s" not in next((tmp_path / "tensorboard").glob("events.*")).read_bytes():
            assert time.monotonic() < deadline, "step 1 was not logged before the end of the run"
            time.sleep(0.05)
    finally:
        sink.finish({"status": "ok"}, tmp_path)


def _fake_two_nodes(make_plan, fake_worker, uri: str):
    launches = tuple(Launch(name=f"node{r}", argv=("python", fake_worker, "{run_dir}/job.json"),
                            env={"RANK": str(r), "WORLD_SIZE": "2"}) for r in (0, 1))
    return replace(make_plan("ok", launches=launches), tracking=TrackSpec(mlflow=uri, experiment="nodes"))


@pytest.mark.slow
def test_of_two_node_runners_only_node0s_logs_a_run(runs, make_plan, fake_worker, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = _fake_two_nodes(make_plan, fake_worker, uri)
    node1 = runner.launch(plan, source_text="workload tiny {}\n", spec_json={"name": "tiny"}, only=["node1"])
    result1 = node1.wait(timeout=120)
    assert result1.status == "ok" and result1.returncodes == (None, 0)
    summary1 = json.loads((node1.run_dir / "summary.json").read_text())
    assert "tracking" not in summary1 or summary1["tracking"] == {}
    assert not (tmp_path / "mlflow.db").exists()  # node 1 never opened the store
    node0 = runner.launch(plan, source_text="workload tiny {}\n", spec_json={"name": "tiny"}, only=["node0"])
    result0 = node0.wait(timeout=120)
    assert result0.status == "ok" and result0.returncodes == (0, None)
    assert json.loads((node0.run_dir / "summary.json").read_text())["tracking"] == {
        "mlflow": {"uri": uri, "experiment": "nodes"}}
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("nodes").experiment_id])
    assert run.info.run_name == node0.run_id and run.info.status == "FINISHED"
    phases = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/phase")}
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "train/step_time_s") if phases[m.step] == 1]
    # every measured step of node 0's rank once: the fake worker measures repeat rounds, each
    # numbered from 0, which the trackers number on (TrackerSteps); the store's history order is
    # not the logging order
    events = [json.loads(line) for line in (node0.run_dir / "events.jsonl").read_text().splitlines() if line]
    measured = [e for e in events if e.get("kind") == "step" and e.get("phase") == "measure" and e["rank"] == 0]
    assert len({e["repeat"] for e in measured}) > 1  # the case this checks: several rounds
    assert len(set(steps)) == len(steps) == len(measured)

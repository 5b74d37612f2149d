"""The runner's live tracking (``track { ... }``, ``accelctl.run.tracking``) with real
processes (``fake_worker.py``) and a real MLflow store (sqlite, read back through MLflow's own
client): the run's status becomes the MLflow status, the per-step figures are those the export
of the stored run gives, a store that cannot be opened is one warning in ``summary.json`` and
never the run's failure, a tracking server that does not answer never holds up the
supervisor thread, and a tracker this Python cannot import refuses the run before it starts."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

import pytest

from accelctl.contract.events import StepMetrics, read_events
from accelctl.errors import RunError
from accelctl.report.tracking import headline_metrics, run_params, step_metrics
from accelctl.run.tracking.fields import mlflow_params
from accelctl.run.supervision import runner
from accelctl.run.store import load_run, write_series
from accelctl.run.tracking import start_tracking
from accelctl.run.tracking.fields import RUN_ID_TAG
from accelctl.workload.types import TrackSpec
from accelctl.frozen import replace


def _launch(plan, **kw):
    handle = runner.launch(plan, source_text="workload tiny {}\n", spec_json={"name": "tiny"}, **kw)
    return handle


def _tracked(plan, uri: str):
    return replace(plan, tracking=TrackSpec(mlflow=uri, experiment="tiny-live"))


def _mlflow_run(uri: str, run_id: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("tiny-live")
    (found,) = client.search_runs([exp.experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'")
    return client, found


@pytest.mark.slow
@pytest.mark.parametrize("mode, status, mlflow_status", [("ok", "ok", "FINISHED"), ("exception", "failed", "FAILED"),
                                                        ("hang", "stopped", "KILLED")])
def test_the_run_status_becomes_the_mlflow_status(mode, status, mlflow_status, runs, make_plan, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    handle = _launch(_tracked(make_plan(mode), uri))
    write_series(handle.run_dir, "series-1", 1, 3)  # as `accelctl run` does for measure { repeat = 3 }
    if mode == "hang":
        events = handle.run_dir / "events.jsonl"
        while sum(isinstance(e, StepMetrics) for e in read_events(events)) < 2:  # stopped mid-run
            time.sleep(0.05)
        handle.stop(grace_s=2)
    result = handle.wait(timeout=120)
    assert result.status == status
    summary = json.loads((handle.run_dir / "summary.json").read_text())
    assert summary["tracking"] == {"mlflow": {"uri": uri, "experiment": "tiny-live"}}
    assert not [w for w in summary["warnings"] if w.startswith("tracking")]
    client, run = _mlflow_run(uri, handle.run_id)
    assert run.info.status == mlflow_status and run.info.run_name == handle.run_id
    assert run.data.tags["accelctl.status"] == status and run.data.tags["accelctl.series"] == "series-1"
    record = load_run(handle.run_id, runs)
    # one mapping: what was logged live is what the export of the stored run logs
    assert run.data.params == mlflow_params(run_params(record))
    logged = sorted((k, m.value, m.step, m.timestamp) for k in run.data.metrics if not k.startswith("summary/")
                    for m in client.get_metric_history(run.info.run_id, k))
    # (a set: the fake worker's repeats emit the same step, value and millisecond twice, and
    # MLflow's store keeps one metric point per (key, value, step, timestamp))
    expected = sorted({(k, v, s, int(w * 1000)) for k, v, s, w in step_metrics(record)})
    assert logged == expected and len(expected) >= (4 if mode == "ok" else 1)
    headline = {k[len("summary/"):]: v for k, v in run.data.metrics.items() if k.startswith("summary/")}
    assert headline == pytest.approx(headline_metrics(record.summary), rel=1e-12)
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"summary.json", "plan.json", "workload.wl"}


def test_a_store_that_cannot_be_opened_is_one_warning_and_the_run_goes_on(runs, make_plan, tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    handle = _launch(_tracked(make_plan("ok"), f"sqlite:///{not_a_folder / 'mlflow.db'}"))
    result = handle.wait(timeout=120)
    assert result.status == "ok" and result.returncodes == (0,)
    summary = json.loads((handle.run_dir / "summary.json").read_text())
    assert summary == result.summary
    tracking = [w for w in summary["warnings"] if w.startswith("tracking")]
    assert len(tracking) == 1 and "mlflow failed" in tracking[0], summary["warnings"]
    assert summary["tracking"] == {}  # logged nowhere
    assert summary["stats"]["step_time"]["median"] > 0  # measured as without tracking


class _SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections and never answers: a tracking server
    that hangs."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def test_a_server_that_never_answers_does_not_hold_up_the_runner(runs, make_plan, tmp_path):
    """The events of a real run fed to the sink as the supervisor thread does: each hand-over
    stays in microseconds while MLflow's client waits on the silent server in the tracking
    thread; the end waits ``finish_timeout_s`` and says so."""
    result = _launch(make_plan("ok", steps=20, repeat=3)).wait(timeout=120)
    events = read_events(result.run_dir / "events.jsonl")
    assert len(events) > 60
    server = _SilentServer()
    try:
        plan = _tracked(make_plan("ok"), f"http://127.0.0.1:{server.port}")
        sink = start_tracking(plan, tmp_path, time.time(), finish_timeout_s=2.0)
        worst = 0.0
        for e in events:
            t0 = time.perf_counter()
            sink.on_event(e)
            worst = max(worst, time.perf_counter() - t0)
        assert worst < 0.05, f"on_event took {worst * 1000:.1f} ms"
        t0 = time.monotonic()
        sink.finish(result.summary, result.run_dir)
        waited = time.monotonic() - t0
        assert 1.9 < waited < 10
        assert any("did not finish within 2 s" in w for w in sink.warnings), sink.warnings
    finally:
        server.close()


def test_a_tracker_this_python_cannot_import_refuses_the_run(runs, make_plan, tmp_path, monkeypatch, capsys):
    """``sys.modules[name] = None`` is how Python itself marks a module as not importable:
    ``importlib.util.find_spec`` answers None, as for a library not installed."""
    monkeypatch.setitem(sys.modules, "wandb", None)
    plan = replace(make_plan("ok"), tracking=TrackSpec(wandb="proj"))
    with pytest.raises(RunError, match="E594.*wandb"):
        _launch(plan)
    assert not runs.exists() or not any(runs.iterdir())  # nothing started, no run folder

    from accelctl.cli import main

    wl = tmp_path / "w.wl"
    wl.write_text("workload w {\n  task pretrain { }\n  model bert(layers = 1, hidden = 32, heads = 2)\n"
                  '  track { wandb = "proj" }\n}\n', encoding="utf-8")
    assert main(["plan", str(wl)]) == 0
    assert "WARNING: track: wandb cannot be imported here: `accelctl run` refuses to start (E594)" in \
        capsys.readouterr().out
    assert main(["run", str(wl), "--headless", "--runs-dir", str(runs)]) == 1
    err = capsys.readouterr().err
    assert f"{wl}:4:11: error[E594]: track: wandb cannot be imported" in err and "Traceback" not in err
    assert not runs.exists() or not any(runs.iterdir())

"""No orphans from the trackers: `accelctl run` of a workload with `track { wandb = ... mlflow =
... }` (a real CPU run, W&B offline, an sqlite MLflow store) leaves no process behind, however it
ends -- Ctrl-C from a terminal (SIGINT to the runner's whole process group), SIGTERM, SIGKILL of
the runner -- and a stop that is asked for still ends the W&B and MLflow runs properly.

What keeps it so, checked here against the real wandb: W&B's service process (``wandb-core``)
runs in a session of its own, so a terminal's Ctrl-C (sent to the foreground process group)
never reaches it; it is told the runner's pid (``--pid``) and ends when the runner is gone
(SIGKILL); at the end of a run the tracking thread tears it down (``WandbLive.close``).  MLflow
(sqlite, the client in the runner) starts no process at all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from viewed import supervisor_of

from accelctl.run.supervision.commands import WANDB_SERVICE_ENV, launch_env

pytestmark = pytest.mark.slow  # a real CPU run each (several seconds)

WORKLOAD = """\
workload tiny_track {
  task pretrain { objective = classification }
  model vit(layers = 1, hidden = 32, heads = 2, image_size = 16, patch = 8, classes = 10)
  dataset synthetic(image_size = 16, channels = 3, classes = 10)
  optimizer sgd(lr = 0.01)
  precision fp32
  batch { micro = 4 }
  measure { warmup = 1 step  steps = 20000 steps }
  track { wandb = "orphans"  mlflow = "sqlite:///store/mlflow.db"  experiment = "orphans" }
  target cpu { devices = 1  threads = 1 }
}
"""


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and (f := _stat(int(d.name))) and f[1] == str(pid) and f[0] not in ("Z", "X")]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _of_run(run_dir: Path) -> list[int]:
    """Live processes whose environment names the run's folder (the worker and its children)."""
    needle = f"ACCELCTL_EVENTS_DIR={run_dir}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "environ").read_bytes().split(b"\0") and _alive(int(d.name)):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def _wait_for(what, timeout_s: float, poll_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(poll_s)
    return what()


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sigkill"])
def test_no_tracker_process_outlives_the_run(how, tmp_path):
    wl = tmp_path / "tiny_track.wl"
    wl.write_text(WORKLOAD, encoding="utf-8")
    runs = tmp_path / "runs"
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wandb-dir"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # this accelctl, from the run's tmp cwd
    (tmp_path / "wandb-dir").mkdir()
    # process_group=0: a group of its own, as a shell gives a foreground job
    runner = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "--headless", "--runs-dir",
                               str(runs)], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              process_group=0)
    try:
        supervisor = supervisor_of(runner)  # the run's own: ``accelctl run`` views it

        def started():
            cores = [c for c in _children(supervisor) if any(a.endswith("wandb-core") for a in _cmdline(c))]
            events = list(runs.glob("*/events.jsonl"))
            steps = events[0].read_text().count('"kind":"step"') if events else 0
            return (cores, events[0].parent) if cores and steps >= 20 else None

        found = _wait_for(started, 180)
        assert found, f"no wandb-core / no steps: {runner.poll()} {runner.stdout.read1().decode()[-2000:]}"
        (core,), run_dir = found
        argv = _cmdline(core)
        assert argv[argv.index("--pid") + 1] == str(supervisor)  # it watches the runner
        assert _stat(core)[3] != _stat(supervisor)[3], "wandb-core shares the runner's session"
        assert _stat(core)[2] != str(supervisor)  # nor its process group: a terminal's Ctrl-C misses it
        workers = _of_run(run_dir)
        assert workers
        assert all(WANDB_SERVICE_ENV.encode() + b"=" not in Path(f"/proc/{w}/environ").read_bytes() for w in workers)
        if how == "ctrl-c":
            os.killpg(runner.pid, signal.SIGINT)  # what a terminal does: the whole foreground group
        elif how == "sigterm":
            runner.send_signal(signal.SIGTERM)
        else:  # SIGKILL of the runner itself: the supervisor (the viewer then ends with exit 1)
            os.kill(supervisor, signal.SIGKILL)
        out = runner.communicate(timeout=120)[0].decode()
        assert runner.returncode == (1 if how == "sigkill" else 130), out[-3000:]
        # nothing left: wandb-core ends with the run (torn down) or with the runner (its --pid watch)
        ended = time.monotonic()
        alive = lambda: [p for p in [core, *workers, *_of_run(run_dir)] if _alive(p)]  # noqa: E731
        _wait_for(lambda: not alive(), 10)
        left = alive()
        print(f"all gone {time.monotonic() - ended:.2f} s after the runner ended")
        assert not left, f"left behind: {[(p, _cmdline(p)) for p in left]}"
        if how == "sigkill":
            return  # the runner had no chance to end the trackers' runs: the run folder is the record
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "stopped"
        assert not [w for w in summary["warnings"] if w.startswith("tracking")], summary["warnings"]
        assert set(summary["tracking"]) == {"wandb", "mlflow"}
        # the end of the run reached both trackers
        sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
        from wandb_offline import read_records

        (wfile,) = (tmp_path / "wandb-dir" / "wandb").glob("offline-run-*/*.wandb")
        recs = read_records(wfile)
        kinds = [r.WhichOneof("record_type") for r in recs]
        assert "history" in kinds and [r.exit.exit_code for r in recs if r.WhichOneof("record_type") == "exit"] == [1]
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
        (mrun,) = client.search_runs([client.get_experiment_by_name("orphans").experiment_id])
        assert mrun.info.status == "KILLED" and mrun.data.tags["accelctl.status"] == "stopped"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_a_launch_never_gets_the_runners_own_wandb_service(monkeypatch, tmp_path):
    """``wandb.init`` in the runner leaves ``WANDB_SERVICE`` (naming this process) in its
    environment; a launch started after it must start its own service if it uses wandb, not log
    into the runner's, which ends with the run.  A token of another process (a service the user
    started) is passed on."""
    from accelctl.contract.plan import Launch

    launch = Launch(name="worker", argv=("python", "-c", "pass"))
    monkeypatch.setenv(WANDB_SERVICE_ENV, f"3-{os.getpid()}-unix-/tmp/wandb-service.sock")
    assert WANDB_SERVICE_ENV not in launch_env(launch, tmp_path, tmp_path)
    other = f"3-{os.getpid() + 1}-unix-/tmp/wandb-service.sock"
    monkeypatch.setenv(WANDB_SERVICE_ENV, other)
    assert launch_env(launch, tmp_path, tmp_path)[WANDB_SERVICE_ENV] == other

"""The runner with real subprocesses (``fake_worker.py``, and the real worker once it lands)."""

from __future__ import annotations

import _thread
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from accelctl.contract.events import LogMessage, RunFailed, RunFinished, RunStarted, StepMetrics, read_events
from accelctl.contract.plan import GeneratedFile, Launch
from accelctl.frozen import replace
from accelctl.run.supervision import runner
from accelctl.run.viewers.console import ConsoleSink

TIMEOUT = 60
SUMMARY_KEYS = {
    "schema_version", "run_id", "status", "workload", "target", "backend", "engine", "device", "task",
    "started", "started_unix_s", "finished_unix_s", "timings", "measure", "world_size", "stats", "env",
    "details", "what_ran", "results", "failure", "stopped_by", "warnings", "launches", "returncodes",
}


class ListSink:
    """Collects the events a run streams and its final result."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.result: Any = None

    def on_event(self, event: Any) -> None:
        self.events.append(event)

    def close(self, result: Any) -> None:
        self.result = result


def run(plan, **kw):
    handle = runner.launch(plan, source_text="workload tiny {}\n", spec_json={"name": "tiny"}, **kw)
    return handle, handle.wait(timeout=TIMEOUT)


def assert_group_gone(pgid):
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def assert_pid_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    # a zombie not yet reaped by init counts as gone
    assert Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def wait_for_step(handle):
    for ev in handle.events():
        if isinstance(ev, StepMetrics):
            return ev
    raise AssertionError("the run ended before its first step")


def test_ok_run_writes_events_summary_and_feeds_sinks(runs, make_plan, fake_worker):
    plan = make_plan(
        "ok",
        options={"torn": True},
        launches=[Launch(
            name="worker",
            argv=("python", fake_worker, "{run_dir}/job.json", "--touch", "{run_dir}/touched"),
            env={"FAKE_ENV_OUT": "{run_dir}/env.txt", "FAKE_ENV_VALUE": "dir={run_dir}"},
        )],
        files=[GeneratedFile(path="hostfile", content="localhost slots=1 # {run_dir}\n")],
    )
    seen, called = ListSink(), []
    handle, result = run(plan, sinks=[seen, called.append])
    d = result.run_dir
    assert (result.status, result.returncodes) == ("ok", (0,))
    assert d.parent == runs and d.name == handle.run_id

    # inputs and {run_dir} substitution: argv, env and generated files
    assert {"workload.wl", "spec.json", "plan.json", "job.json", "hostfile", "worker.log", "events.jsonl", "summary.json", "rank0.jsonl"} <= {p.name for p in d.iterdir()}
    assert (d / "touched").read_text() == "touched"
    assert (d / "env.txt").read_text() == f"dir={d}"
    assert (d / "hostfile").read_text() == f"localhost slots=1 # {d}\n"
    assert "fake worker rank 0 mode ok" in (d / "worker.log").read_text()

    # events: every line of rank0.jsonl, torn lines reassembled, in order
    events = read_events(d / "events.jsonl")
    assert [e.to_dict() for e in events] == [e.to_dict() for e in read_events(d / "rank0.jsonl")]
    kinds = [e.kind for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert sum(isinstance(e, StepMetrics) for e in events) == 2 + 4 * 2
    assert seen.events == events == called and list(handle.events()) == events
    assert seen.result is result

    # summary.json
    summary = json.loads((d / "summary.json").read_text())
    assert summary == result.summary
    assert set(summary) == SUMMARY_KEYS
    assert (summary["status"], summary["workload"], summary["target"], summary["backend"]) == ("ok", "tiny", "cpu", "cpu")
    assert summary["failure"] is None and summary["stopped_by"] is None
    assert summary["env"]["cpu_model"] == "Fake CPU" and summary["details"] == {"model": "fake"}
    assert summary["results"] == {"final_loss": pytest.approx(3.3)}
    assert summary["measure"] == {"warmup": 2, "steps": 4, "repeat": 2}
    assert summary["warnings"] == ["a plan warning", "fake warning in repeat 0", "fake warning in repeat 1"]
    assert summary["launches"][0]["argv"][1:] == [fake_worker, f"{d}/job.json", "--touch", f"{d}/touched"]
    assert summary["timings"]["wall_s"] > 0 and {"setup_s", "warmup_s", "measure_s"} <= set(summary["timings"])
    stats = summary["stats"]
    assert stats["step_time"]["count"] == 8
    assert stats["step_time"]["median"] == pytest.approx(0.015)  # 0.01, 0.02 alternating
    assert stats["warmup_steps"] == 2 and stats["warmup_time_s"] == pytest.approx(0.1)
    assert stats["throughput"]["samples_per_s"]["median"] == pytest.approx(300.0)  # (400 + 200) / 2
    assert stats["loss"]["first"] == 4.0 and stats["loss"]["decreased"] is True
    assert len(stats["repeat_means_s"]) == 2

    # the store lists it
    from accelctl.run import store
    [rec] = store.list_runs(runs)
    # the fake pre-training counts tokens: sequences/s, the unit report names it too (one throughput)
    assert (rec.id, rec.status, rec.throughput_unit) == (d.name, "ok", "sequences/s")
    assert rec.throughput == pytest.approx(300.0)
    assert rec.median_step_time_s == pytest.approx(0.015)


def test_crash_without_run_failed_is_reported_with_the_log_tail(runs, make_plan):
    _, result = run(make_plan("crash"))
    assert (result.status, result.returncodes) == ("failed", (7,))
    failure = result.summary["failure"]
    assert failure["reason"] == "crashed"
    assert "exit code 7" in failure["message"]
    assert "boom: simulated segfault in the fake worker" in failure["message"]
    events = read_events(result.run_dir / "events.jsonl")
    assert [e.reason for e in events if isinstance(e, RunFailed)] == ["crashed"]
    assert result.summary["stats"]["step_time"]["count"] == 2  # what was measured is kept


@pytest.mark.parametrize("mode, reason, rc", [("nan", "nan_loss", 3), ("exception", "exception", 1)])
def test_worker_reported_failure(runs, make_plan, mode, reason, rc):
    _, result = run(make_plan(mode))
    assert (result.status, result.returncodes) == ("failed", (rc,))
    assert result.summary["failure"]["reason"] == reason
    failed = [e for e in read_events(result.run_dir / "events.jsonl") if isinstance(e, RunFailed)]
    assert [e.reason for e in failed] == [reason]  # nothing synthesised on top


def test_stop_interrupts_the_whole_process_group(runs, make_plan):
    handle = runner.launch(make_plan("hang"), source_text=None, spec_json=None)
    wait_for_step(handle)
    child = int((handle.run_dir / "child0.pid").read_text())
    handle.stop()
    result = handle.wait(timeout=TIMEOUT)
    assert (result.status, result.returncodes) == ("stopped", (130,))
    assert result.summary["failure"]["reason"] == "stopped"  # the worker said so itself
    assert result.summary["stopped_by"] == "user"
    assert_group_gone(handle.pids[0])
    assert_pid_gone(child)
    assert json.loads((result.run_dir / "summary.json").read_text())["status"] == "stopped"


def test_stop_escalates_to_sigkill(runs, make_plan):
    handle = runner.launch(make_plan("stubborn"), source_text=None, spec_json=None, grace_s=0.3)
    wait_for_step(handle)
    t0 = time.monotonic()
    handle.stop()
    result = handle.wait(timeout=TIMEOUT)
    assert time.monotonic() - t0 >= 0.6  # SIGINT, SIGTERM after 0.3 s, SIGKILL after 0.6 s
    assert (result.status, result.returncodes) == ("stopped", (-signal.SIGKILL,))
    assert result.summary["failure"]["reason"] == "stopped"
    assert "signal 9" in result.summary["failure"]["message"]
    assert_group_gone(handle.pids[0])


def test_keyboard_interrupt_in_wait_stops_and_returns(runs, make_plan):
    handle = runner.launch(make_plan("hang"), source_text=None, spec_json=None)
    wait_for_step(handle)
    # Ctrl-C reaches a runner whose SIGINT is handled (interrupt_main does nothing where this
    # test process was started with SIGINT ignored, e.g. `pytest &` in a script)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    try:
        timer.start()
        result = handle.wait(timeout=TIMEOUT)  # returns instead of raising
        timer.join()
    finally:
        signal.signal(signal.SIGINT, old)
    assert result.status == "stopped"
    assert (result.run_dir / "summary.json").exists()
    assert_group_gone(handle.pids[0])


def test_one_rank_failing_stops_the_others(runs, make_plan, fake_worker):
    launches = [
        Launch(name=f"rank{r}", argv=("python", fake_worker, "{run_dir}/job.json"), env={"RANK": str(r), "WORLD_SIZE": "2"})
        for r in range(2)
    ]
    handle, result = run(make_plan(options={"crash_rank": 1}, launches=launches))
    assert result.status == "failed"
    assert result.returncodes == (130, 7)  # rank 0 was interrupted after rank 1 crashed
    assert result.summary["failure"]["reason"] == "crashed"
    assert result.summary["stopped_by"] == "failure"
    for pgid in handle.pids:
        assert_group_gone(pgid)
    reasons = [e.reason for e in read_events(result.run_dir / "events.jsonl") if isinstance(e, RunFailed)]
    assert sorted(reasons) == ["crashed", "stopped"]


def test_a_failed_rank_that_does_not_exit_is_stopped(runs, make_plan):
    _, result = run(make_plan("linger"), grace_s=0.3)
    assert (result.status, result.returncodes) == ("failed", (130,))
    assert result.summary["failure"]["reason"] == "nan_loss"
    assert result.summary["stopped_by"] == "failure"


PRE = "import os, time; time.sleep(0.3); open('pre.txt', 'w').write(os.getcwd())"


def test_a_wait_launch_finishes_before_the_next_starts_in_its_cwd(runs, make_plan, fake_worker, tmp_path, monkeypatch):
    oh = tmp_path / "optimum-habana"
    oh.mkdir()
    monkeypatch.setenv("OPTIMUM_HABANA_DIR", str(oh))
    launches = [
        Launch(name="precompile", argv=("python", "-c", PRE), cwd="{optimum_habana}", wait=True),
        Launch(name="worker", argv=("python", fake_worker, "{run_dir}/job.json", "--require", "{optimum_habana}/pre.txt")),
    ]
    _, result = run(make_plan("ok", steps=2, repeat=1, launches=launches))
    assert (result.status, result.returncodes) == ("ok", (0, 0))
    assert (oh / "pre.txt").read_text() == str(oh)
    pre, main = result.summary["launches"]
    assert pre["cwd"] == str(oh) and main["cwd"] is None
    assert pre["wall_s"] >= 0.3
    assert main["argv"][-1] == f"{oh}/pre.txt"


def test_a_failing_wait_launch_cancels_the_rest(runs, make_plan, fake_worker):
    launches = [
        Launch(name="precompile", argv=("python", "-c", "print('compiler error'); raise SystemExit(4)"), wait=True),
        Launch(name="worker", argv=("python", fake_worker, "{run_dir}/job.json")),
    ]
    _, result = run(make_plan("ok", launches=launches))
    assert (result.status, result.returncodes) == ("failed", (4, None))
    failure = result.summary["failure"]
    assert failure["reason"] == "crashed" and "'precompile' exited with exit code 4" in failure["message"]
    assert "compiler error" in failure["message"]
    assert result.summary["launches"][1]["pid"] is None
    assert result.summary["stopped_by"] == "failure"  # the worker launch was cancelled


def test_an_unset_environment_placeholder_is_a_launch_error(runs, make_plan, monkeypatch):
    monkeypatch.delenv("OPTIMUM_HABANA_DIR", raising=False)
    plan = make_plan(launches=[Launch(name="spawn", argv=("python", "{optimum_habana}/examples/gaudi_spawn.py"))])
    _, result = run(plan)
    assert (result.status, result.returncodes) == ("failed", (127,))
    assert result.summary["failure"]["reason"] == "launch_error"
    assert "OPTIMUM_HABANA_DIR" in result.summary["failure"]["message"]


def test_a_command_that_cannot_start(runs, make_plan):
    plan = make_plan(launches=[Launch(name="nope", argv=("accelctl-no-such-command", "x"))])
    _, result = run(plan)
    assert (result.status, result.returncodes) == ("failed", (127,))
    assert result.summary["failure"]["reason"] == "launch_error"


def test_a_broken_sink_does_not_break_the_run(runs, make_plan):
    def broken(event):
        raise RuntimeError("sink bug")

    def exits(event):
        raise SystemExit(1)  # what rich does when stdout is a closed pipe

    good = ListSink()
    _, result = run(make_plan("ok", steps=2, repeat=1), sinks=[broken, exits, good])
    assert result.status == "ok" and good.result is result and len(good.events) > 5


def test_escaping_generated_file_refuses_before_starting(runs, make_plan):
    from accelctl.run.store import RunStoreError

    with pytest.raises(RunStoreError):
        runner.launch(make_plan(files=[GeneratedFile(path="../x", content="")]), source_text=None, spec_json=None)
    assert list(runs.iterdir()) == []  # no half-written run folder left behind


def test_argv_heads_are_mapped(tmp_path):
    import sys

    assert runner.resolve_argv(["python", "-m", "x", "{run_dir}/j"], tmp_path) == [sys.executable, "-m", "x", f"{tmp_path}/j"]
    assert runner.resolve_argv(["torchrun", "--nproc_per_node=2", "w.py"], tmp_path)[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert runner.resolve_argv(["deepspeed", "--num_gpus", "2"], tmp_path)[:3] == [
        sys.executable, "-m", "deepspeed.launcher.runner"]
    assert runner.resolve_argv(["neuron_parallel_compile", "torchrun"], tmp_path) == ["neuron_parallel_compile", "torchrun"]


def test_console_sink_prints_plain_lines_when_headless(runs, make_plan):
    plan = make_plan("ok")
    buf = io.StringIO()
    _, result = run(plan, sinks=[ConsoleSink(plan.job, headless=True, file=buf, every=5)])
    text = buf.getvalue()
    assert "\x1b[" not in text  # no colour, no cursor control
    assert f"run {result.run_dir.name}" in text
    assert "versions: python 3.11, torch 0.0-fake" in text and "cpu: Fake CPU" in text
    assert "· warmup" in text and "· measure (repeat 2/2)" in text
    assert "step 5/10" in text and "step 10/10" in text and "samples/s" in text
    assert "warning: fake warning in repeat 0" in text
    assert "step time: median 15.00 ms" in text and "warm-up: 2 steps" in text
    assert f"run dir: {result.run_dir}" in text


# --------------------------------------------------------------------------- the real worker



@pytest.mark.slow
def test_real_worker_tiny_pretrain(runs, make_plan, make_job):
    from accelctl.workload.types import DatasetSpec, ModelSpec

    job = make_job(
        warmup=1, steps=3, repeat=1,
        model=ModelSpec(family="gpt2", source="arch", stand_in={"layers": 1, "hidden": 32, "heads": 2, "vocab": 128}, weights="stand_in"),
        data=DatasetSpec(kind="synthetic", seq_len=16),
    )
    plan = make_plan(launches=[Launch(name="worker", argv=("python", "-m", "accelctl.worker", "{run_dir}/job.json"))])

    plan = replace(plan, job=job)
    _, result = run(plan)
    log = (result.run_dir / "worker.log").read_text()
    assert result.status == "ok", (result.summary["failure"], log[-2000:])
    events = read_events(result.run_dir / "events.jsonl")
    assert any(isinstance(e, RunStarted) for e in events) and isinstance(events[-1], RunFinished)
    assert result.summary["stats"]["step_time"]["count"] == 3
    assert result.summary["stats"]["warmup_steps"] == 1
    assert not [e for e in events if isinstance(e, LogMessage) and e.level == "error"]


def test_console_summary_rows_for_generation_and_failure():
    from accelctl.run.viewers.console import summary_rows

    summary = {
        "status": "failed",
        "failure": {"reason": "nan_loss", "rank": 0, "message": "loss is nan at step 3\nmore"},
        "stats": {
            "step_time": {"median": 0.5, "mean": 0.6, "p90": 0.9, "count": 4},
            "throughput": {"samples_per_s": None, "tokens_per_s": {"median": 200.0, "mean": 190.0}},
            "generation": {
                "latency_median_s": 0.5, "latency_p90_s": 0.9, "ttft_median_s": 0.05,
                "per_token_median_s": 0.004, "per_token_mean_s": 0.005, "tokens_per_s_median": 200.0,
            },
            "loss": None, "warmup_steps": 0,
        },
        "timings": {"wall_s": 3.0},
    }
    rows = dict(summary_rows(summary, "/runs/x"))
    assert rows["failure"] == "nan_loss (rank 0): loss is nan at step 3"
    assert rows["latency"] == "median 500.00 ms · p90 900.00 ms"
    assert rows["per token"] == "median 4.00 ms · mean 5.00 ms"
    assert rows["throughput"] == "200.00 tokens/s (median of the measured steps)"  # the one throughput
    assert rows["run dir"] == "/runs/x" and "warm-up" not in rows and "loss" not in rows


@pytest.mark.slow
def test_real_worker_two_ranks_under_torchrun(runs, make_plan, make_job):

    from accelctl.workload.types import BatchSpec, ModelSpec

    model = ModelSpec(family="gpt2", source="arch", stand_in={"layers": 1, "hidden": 32, "heads": 2, "vocab": 128}, weights="stand_in")
    job = replace(make_job(warmup=1, steps=3, repeat=1, model=model), batch=BatchSpec(micro=2))
    argv = ("torchrun", "--standalone", "--nproc_per_node=2", "-m", "accelctl.worker", "{run_dir}/job.json")
    plan = replace(make_plan(launches=[Launch(name="torchrun", argv=argv, env={"OMP_NUM_THREADS": "1"}, processes=2)]), job=job)
    handle, result = run(plan)
    assert result.status == "ok", (result.summary["failure"], (result.run_dir / "worker.log").read_text()[-2000:])
    assert result.summary["launches"][0]["argv"][1:3] == ["-m", "torch.distributed.run"]
    stats = result.summary["stats"]
    assert (result.summary["world_size"], stats["ranks"], stats["step_time"]["count"]) == (2, 2, 3)
    assert set(stats["per_rank"]) == {"0", "1"}
    # global samples per step = micro-batch 2 x 2 ranks, counted once
    st = stats["step_time"]
    assert 4 / st["max"] <= stats["throughput"]["samples_per_s"]["median"] <= 4 / st["min"]
    assert_group_gone(handle.pids[0])


def test_a_runner_started_with_sigint_ignored_still_stops_its_launches_with_sigint(tmp_path):
    """`accelctl run &` in a script (or nohup, some CI runners) inherits SIGINT ignored, and so
    would every launch: the stop's SIGINT then reaches nobody and the run ends by SIGTERM after
    the grace period.  The runner starts its launches with SIGINT at its default."""
    code = f"""
import json, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # what the runner inherited
sys.path.insert(0, {str(Path(__file__).parent)!r})
from conftest import make_plan
from accelctl.run.supervision import runner
handle = runner.launch(make_plan("hang"), source_text=None, spec_json=None, runs_root={str(tmp_path)!r})
time.sleep(3)
handle.stop()
result = handle.wait(timeout=60)
print(json.dumps([result.status, list(result.returncodes)]))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["stopped", [130]]

"""Every workload's cpu target runs for real through accelctl run, end to end.

One real child process per workload (the launched worker: PyTorch on this CPU), with
the events and summary checked: steady-state figures present, warm-up excluded, loss
finite and falling for training, exactly 100 new tokens per call for BLOOMZ.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelctl.api import load
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
CASES = [(wl.name, spec.name)
         for wl in sorted((ROOT / "workloads").glob("*.wl"))
         for spec in load(wl) if any(t.name == "cpu" for t in spec.targets)]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("file,workload", CASES, ids=[f"{f}:{w}" for f, w in CASES])
def test_cpu_target_runs(file, workload, tmp_path):
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(ROOT / "workloads" / file),
                         "--workload", workload, "--target", "cpu", "--headless", "--runs-dir", str(tmp_path)],
                        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    spec = next(s for s in load(ROOT / "workloads" / file) if s.name == workload)
    measure = (spec.target("cpu").measure or spec.measure)
    assert summary["status"] == "ok"
    st = summary["stats"]
    assert st["step_time"]["count"] == measure.steps * measure.repeat
    assert st["warmup_steps"] == measure.warmup
    assert st["step_time"]["median"] > 0
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]
    kinds = [e["kind"] for e in events]
    assert kinds.count("run_started") >= 1 and "run_finished" in kinds and "run_failed" not in kinds
    steps = [e for e in events if e["kind"] == "step" and e["rank"] == 0]
    assert len(steps) == measure.warmup + measure.steps * measure.repeat
    if spec.task.training:
        losses = [e["loss"] for e in steps]
        assert all(math.isfinite(x) for x in losses)
        assert st["loss"]["decreased"], st["loss"]
    if spec.task.kind == "generate":
        assert {e["new_tokens"] for e in steps} == {spec.task.max_new_tokens}
        assert st["generation"]["per_token_median_s"] > 0 and st["generation"]["ttft_median_s"] > 0
    for name in ("workload.wl", "spec.json", "plan.json", "job.json", "worker.log"):
        assert (run_dir / name).exists(), name


def test_rehearsal_of_an_accelerator_target_runs_here_and_is_marked_everywhere(tmp_path):
    """`accelctl run vit_fp8.wl -t p5_fp8 --rehearse`: the H100 FP8 target's plan on this CPU."""
    from accelctl.report.compare import compare, compare_table
    from accelctl.report.entry import entry_from_run
    from accelctl.run.store import load_run

    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(ROOT / "workloads" / "vit_fp8.wl"),
                         "-t", "p5_fp8", "--rehearse", "--headless", "--runs-dir", str(tmp_path)],
                        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "REHEARSAL of target p5_fp8 (8 x h100) on this CPU" in cp.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    ran = summary["what_ran"]
    assert summary["status"] == "ok" and summary["device"] == "cpu" and summary["target"] == "p5_fp8"
    assert ran["rehearsal"]["of"] == "p5_fp8" and ran["rehearsal"]["device"] == "h100"
    assert ran["model"]["scale"] == "stand_in" and 0 < ran["model"]["params"] < 1e6
    assert ran["model"]["weights_source"] == "random init"
    entry = entry_from_run(load_run(run_dir.name, str(tmp_path)))
    assert entry.ran.startswith("REHEARSAL of p5_fp8 on cpu, stand-in") and "REHEARSAL" in entry.name
    assert entry.price_per_hour is None  # the H100 instance's price is not what this run cost
    real_looking = replace(entry, ran="", source="other")
    notes = compare_table(compare(real_looking, entry)).notes
    assert any(n.startswith("NOT THE SAME MODEL") for n in notes)


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd and int(proc.name) != os.getpid():
                found.append(int(proc.name))
    return found


def _long_ddp(tmp_path: Path, steps: int) -> tuple[Path, Path]:
    text = (ROOT / "workloads" / "ddp_cpu.wl").read_text().replace("steps = 10 steps", f"steps = {steps} steps")
    wl = tmp_path / "long.wl"
    wl.write_text(text)
    return wl, tmp_path / "runs"


def _foreground(wl: Path, runs: Path) -> subprocess.Popen:
    """``accelctl run`` as a terminal's foreground job: the leader of a session of its own."""
    return subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", "ddp_cpu", "--headless",
                             "--runs-dir", str(runs)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _until_measure(proc: subprocess.Popen) -> None:
    for line in proc.stdout:  # type: ignore[union-attr]
        if "[measure]" in line:
            return
    raise AssertionError(f"the run ended before its first measured step: {proc.wait()}")


def _wait_gone(runs: Path, timeout_s: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := _processes_mentioning(str(runs))) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_to_the_foreground_run_stops_the_run_and_leaves_no_process(sig, tmp_path):
    """The foreground ``run`` views the run's own supervisor: Ctrl-C (SIGINT to the terminal's
    foreground group) or SIGTERM (a process manager, a CI timeout) stops the run at once -- the
    2-rank run is recorded `stopped`, and the supervisor, torchrun and both ranks end."""
    wl, runs = _long_ddp(tmp_path, 5000)
    proc = _foreground(wl, runs)
    try:
        _until_measure(proc)
        # the supervisor (its own session: the terminal's signals miss it), torchrun and two ranks
        assert len(_processes_mentioning(str(runs))) >= 4
        os.killpg(proc.pid, sig)
        rest = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest[-2000:]
    assert "status: stopped" in rest and "Traceback" not in rest, rest[-2000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"
    assert _wait_gone(runs) == []


def test_a_hangup_of_the_foreground_run_only_detaches_it_and_the_run_ends_ok(tmp_path):
    """SIGHUP to the terminal's session (an ssh connection that drops): the viewer detaches, the
    run goes on under its supervisor -- `accelctl status RUN` shows it running -- and ends `ok`,
    with nothing of it left."""
    wl, runs = _long_ddp(tmp_path, 150)
    proc = _foreground(wl, runs)
    try:
        _until_measure(proc)
        os.killpg(proc.pid, signal.SIGHUP)
        rest = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    assert proc.returncode == 130 and f"a hang-up: detached from run {run_dir.name}; it goes on" in rest, rest
    from accelctl.run.store import consoles

    assert consoles.viewer_folders(runs) == []  # the run is named: its console folder went with the viewer
    status = [sys.executable, "-m", "accelctl.cli", "status", run_dir.name, "--json", "--runs-dir", str(runs)]

    def state() -> str:
        done = subprocess.run(status, cwd=ROOT, capture_output=True, text=True, timeout=120)
        return json.loads(done.stdout)["result"]["runs"][0]["state"]

    assert state() == "running"
    deadline = time.monotonic() + 300
    while (now := state()) == "running" and time.monotonic() < deadline:
        time.sleep(1)
    assert now == "ok"
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "ok"
    assert _wait_gone(runs) == []

"""Every workload's cpu target runs for real through accelctl run, end to end.

One real child process per workload (the launched worker: PyTorch on this CPU), with
the events and summary checked: steady-state figures present, warm-up excluded, loss
finite and falling for training, exactly 100 new tokens per call for BLOOMZ.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import load

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
    real_looking = dataclasses.replace(entry, ran="", source="other")
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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_the_runner_stops_the_run_and_leaves_no_process(sig, tmp_path):
    """Like Ctrl-C: the 2-rank run is stopped, recorded `stopped`, and torchrun and both ranks end."""
    text = (ROOT / "workloads" / "ddp_cpu.wl").read_text().replace("steps = 10 steps", "steps = 5000 steps")
    wl = tmp_path / "long.wl"
    wl.write_text(text)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", "ddp_cpu", "--headless",
                             "--runs-dir", str(runs)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        for line in proc.stdout:
            if "[measure]" in line:
                break
        assert len(_processes_mentioning(str(runs))) >= 3  # torchrun and two ranks, running
        proc.send_signal(sig)
        rest = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest[-2000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"
    assert _processes_mentioning(str(runs)) == []

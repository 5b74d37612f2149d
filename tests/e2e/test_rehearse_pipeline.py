"""Pipeline parallel in ``--rehearse`` (issue 24): an H100 target's 1F1B pipeline runs on this
CPU's gloo ranks as a real pipeline of the stand-in's stages, its schedule kept, marked as a
rehearsal; its loss curve is the single-process rehearsal's (same seed, same global batch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import api
from accelctl.contract.events import LogMessage, StepMetrics, read_events

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = """workload ppr {
  task pretrain { }
  model llama(layers = 8, hidden = 64, heads = 4, ffn = 96, vocab = 256) {
    stand_in = llama(layers = 3, hidden = 64, heads = 4, ffn = 96, vocab = 256)
  }
  dataset synthetic { seq_len = 64 }
  batch { micro = 2  accumulation = 2 }
  measure { warmup = 1 steps  steps = 3 steps }
  target h100 { device = h100  devices = 2  parallel = pipeline(pp = 2, schedule = one_f_one_b) }
  target one  { device = h100  devices = 1 }
}
"""

pytestmark = pytest.mark.slow


def _run(path: Path, target: str, runs: Path) -> Path:
    argv = [sys.executable, "-m", "accelctl.cli", "run", str(path), "-t", target, "--rehearse", "--headless",
            "--runs-dir", str(runs)]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


def _losses(run_dir: Path) -> list[float]:
    return [e.loss for e in read_events(run_dir / "rank0.jsonl") if isinstance(e, StepMetrics)]


def test_a_one_f_one_b_pipeline_target_rehearses_as_two_stages_on_two_gloo_ranks(tmp_path):
    path = tmp_path / "ppr.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    plan = api.plan(api.load(path)[0], "h100", rehearse=True)
    pp, world = plan.job.parallel.pp, sum(launch.processes for launch in plan.launches)
    run_dir = _run(path, "h100", tmp_path / "runs")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["what_ran"]["rehearsal"]["of"] == "h100"
    job = json.loads((run_dir / "job.json").read_text())
    assert job["parallel"]["pp"] == pp and job["rehearsal_of"] == "h100"
    if pp == 1:  # a machine of one core holds no second stage, and says so in the changes
        assert any("pipeline parallel (pp 2) -> 1" in c for c in summary["what_ran"]["rehearsal"]["changes"])
        return
    assert (pp, world, job["parallel"]["schedule"]) == (2, 2, "one_f_one_b")
    said = [e.message for r in range(world) for e in read_events(run_dir / f"rank{r}.jsonl")
            if isinstance(e, LogMessage) and e.message.startswith("pipeline:")]
    # the stand-in's 3 blocks split as the plan's mesh.stage_layers splits them
    assert said == ["pipeline: stage 0 of 2 (one_f_one_b) holds blocks 0, 1 + embeddings",
                    "pipeline: stage 1 of 2 (one_f_one_b) holds blocks 2 + head"], said
    # the same arithmetic as one process running the whole stand-in
    piped, whole = _losses(run_dir), _losses(_run(path, "one", tmp_path / "one"))
    assert len(piped) == 4 and len(set(piped)) > 1 and piped == pytest.approx(whole, abs=1e-5), (piped, whole)

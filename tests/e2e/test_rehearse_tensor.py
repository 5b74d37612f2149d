"""Tensor parallel in ``--rehearse`` (issue 24): an H100 target's FSDP × tensor × sequence
parallel layout runs on this CPU's gloo ranks with the stand-in, its tp scaled to the cores,
marked as a rehearsal in the summary; a tensor layout the target's plan refuses is refused by
``run --rehearse`` in the same words at the same line, before a run folder exists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import api
from accelctl.contract.events import LogMessage, read_events
from accelctl.errors import PlanError

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = """workload tpr {
  task pretrain { }
  model llama(layers = 2, hidden = 64, heads = 4, ffn = 96, vocab = 256)
  dataset synthetic { seq_len = 64 }
  batch { micro = 2  accumulation = 2 }
  measure { warmup = 1 steps  steps = 2 steps }
  target h100 { device = h100  devices = 8  parallel = fsdp(tp = 4, sequence_parallel = on) }
  target compiled { device = h100  devices = 2  parallel = tensor(tp = 2)  optimize { compile = on }
                    measure { warmup = 2 steps  steps = 3 steps } }
}
"""

pytestmark = pytest.mark.slow


def _run(path: Path, target: str, runs: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "accelctl.cli", "run", str(path), "-t", target, "--rehearse", "--headless",
            "--runs-dir", str(runs)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_fsdp_x_tensor_x_sequence_parallel_target_rehearses_on_gloo_ranks(tmp_path):
    path = tmp_path / "tpr.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    plan = api.plan(api.load(path)[0], "h100", rehearse=True)
    tp, world = plan.job.parallel.tp, sum(launch.processes for launch in plan.launches)
    cp = _run(path, "h100", tmp_path / "runs")
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["what_ran"]["rehearsal"]["of"] == "h100"
    job = json.loads((run_dir / "job.json").read_text())
    assert job["parallel"]["tp"] == tp and job["rehearsal_of"] == "h100"
    if tp > 1:  # a machine of one core cannot split it, and says so in the changes
        said = [e.message for r in range(world) for e in read_events(run_dir / f"rank{r}.jsonl")
                if isinstance(e, LogMessage) and e.message.startswith("sequence parallel:")]
        assert len(said) == world and all(f"ran on {64 // tp} positions of 64" in m for m in said), said
    else:
        assert any("tensor parallel (tp 4) -> 1" in c for c in summary["what_ran"]["rehearsal"]["changes"])


def test_a_tensor_layout_the_plan_refuses_is_refused_by_the_rehearsal_in_the_same_words(tmp_path):
    path = tmp_path / "tpr.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    with pytest.raises(PlanError) as refused:
        api.plan(api.load(path)[0], "compiled")
    d = refused.value.diagnostics[0]
    cp = _run(path, "compiled", tmp_path / "runs")
    assert cp.returncode == 1 and f"{path}:{d.span.line}:{d.span.column}: error[{d.code}]" in cp.stderr, cp.stderr
    assert d.hint in cp.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())

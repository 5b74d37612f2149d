"""Pipeline parallel in ``--rehearse`` (issue 24): an H100 target's 1F1B pipeline runs on this
CPU's gloo ranks as a real pipeline of the stand-in's stages, its schedule kept, marked as a
rehearsal; its loss curve is the single-process rehearsal's (same seed, same global batch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.contract.events import StepMetrics, read_events
from tests.e2e.rehearsed_run import rehearsed

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


def _losses(run_dir: Path) -> list[float]:
    return [e.loss for e in read_events(run_dir / "rank0.jsonl") if isinstance(e, StepMetrics)]


def test_a_one_f_one_b_pipeline_target_rehearses_as_two_stages_on_two_gloo_ranks(tmp_path):
    path = tmp_path / "ppr.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    r = rehearsed(path, "h100", tmp_path / "runs")
    if r.plan.job.parallel.pp == 1:  # a machine of one core holds no second stage, and says so in the changes
        assert any("pipeline parallel (pp 2) -> 1" in c for c in r.changes)
        return
    assert (r.job["parallel"]["pp"], r.world, r.job["parallel"]["schedule"]) == (2, 2, "one_f_one_b")
    # the stand-in's 3 blocks split as the plan's mesh.stage_layers splits them
    assert r.said("pipeline:") == ["pipeline: stage 0 of 2 (one_f_one_b) holds blocks 0, 1 + embeddings",
                                   "pipeline: stage 1 of 2 (one_f_one_b) holds blocks 2 + head"]
    # the same arithmetic as one process running the whole stand-in
    piped, whole = _losses(r.run_dir), _losses(rehearsed(path, "one", tmp_path / "one").run_dir)
    assert len(piped) == 4 and len(set(piped)) > 1 and piped == pytest.approx(whole, abs=1e-5), (piped, whole)

"""Tensor parallel in ``--rehearse`` (issue 24): an H100 target's FSDP × tensor × sequence
parallel layout runs on this CPU's gloo ranks with the stand-in, its tp scaled to the cores,
marked as a rehearsal in the summary; a tensor layout the target's plan refuses is refused by
``run --rehearse`` in the same words at the same line, before a run folder exists."""

from __future__ import annotations

import pytest

from accelctl import api
from accelctl.errors import PlanError
from tests.e2e.rehearsed_run import rehearse, rehearsed

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


def test_fsdp_x_tensor_x_sequence_parallel_target_rehearses_on_gloo_ranks(tmp_path):
    path = tmp_path / "tpr.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    r = rehearsed(path, "h100", tmp_path / "runs")
    tp = r.plan.job.parallel.tp
    if tp > 1:  # a machine of one core cannot split it, and says so in the changes
        said = r.said("sequence parallel:")
        assert len(said) == r.world and all(f"ran on {64 // tp} positions of 64" in m for m in said), said
    else:
        assert any("tensor parallel (tp 4) -> 1" in c for c in r.changes)

def test_a_tensor_layout_the_plan_refuses_is_refused_by_the_rehearsal_in_the_same_words(tmp_path):
    path = tmp_path / "tpr.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    with pytest.raises(PlanError) as refused:
        api.plan(api.load(path)[0], "compiled")
    d = refused.value.diagnostics[0]
    cp = rehearse(path, "compiled", tmp_path / "runs")
    assert cp.returncode == 1 and f"{path}:{d.span.line}:{d.span.column}: error[{d.code}]" in cp.stderr, cp.stderr
    assert d.hint in cp.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())

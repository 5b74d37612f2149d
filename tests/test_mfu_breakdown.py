"""bench/mfu_breakdown.py on a tiny real BERT and GPT-2 (the worker's model, optimizer and
batches): every class accounted for, FLOPs split without loss, the attention core found.
No timing is asserted: the figures belong to the script's own runs."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import mfu_breakdown  # noqa: E402

TINY = """workload tiny_{name} {{
  seed = 0
  task pretrain {{ objective = {objective} }}
  model {model}
  dataset synthetic(seq_len = 16 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch {{ micro = 2 }}
  measure {{ warmup = 1 step  steps = 2 steps }}
  target cpu {{ devices = 1  threads = 1 }}
}}
"""
MODELS = {
    "bert": ("mlm", "bert(layers = 1, hidden = 32, heads = 2, ffn = 64, vocab = 200, max_positions = 64)"),
    "gpt2": ("causal_lm", "gpt2(layers = 1, hidden = 32, heads = 2, vocab = 200, max_positions = 64)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_breakdown_accounts_for_the_whole_step(tmp_path, name):
    objective, model = MODELS[name]
    wl = tmp_path / f"{name}.wl"
    wl.write_text(TINY.format(name=name, objective=objective, model=model))
    peak = 1e11
    r = mfu_breakdown.breakdown(mfu_breakdown.Workload(wl, "worker"), warmup=1, steps=2, peak=peak)
    rows = {row["class"]: row for row in r["classes"]}
    assert list(rows) == list(mfu_breakdown.CLASSES)
    assert math.isclose(sum(row["share"] for row in rows.values()), 1.0, rel_tol=1e-9)
    assert math.isclose(sum(row["seconds"] for row in rows.values()), r["step_s"], rel_tol=1e-9)
    # every counted FLOP lands in a class, and only the GEMM classes have any
    assert math.isclose(sum(row["flops"] for row in rows.values()), r["flops_per_step"], rel_tol=1e-9)
    assert rows["matmul"]["flops"] > 0 and rows["attention"]["flops"] > 0
    assert all(not rows[c]["flops"] for c in mfu_breakdown.CLASSES if c not in ("matmul", "attention"))
    # the classes the step is made of all took time
    for cls in ("matmul", "attention", "norm/act/dropout", "embedding+loss", "optimizer"):
        assert rows[cls]["seconds"] > 0, cls
    assert math.isclose(r["mfu"], r["flops_per_step"] / r["step_s"] / peak)
    assert len(r["losses"]) == 2 and all(math.isfinite(x) for x in r["losses"])


def test_an_op_on_a_4d_tensor_is_attention_and_the_optimizer_wins_over_the_op_name():
    class Ev:
        def __init__(self, name, parent=None, shapes=()):
            self.name, self.cpu_parent, self.input_shapes = name, parent, list(shapes)

    assert mfu_breakdown.class_of(Ev("aten::bmm", shapes=[[2, 4, 16, 8], [2, 4, 8, 16]])) == "attention"
    assert mfu_breakdown.class_of(Ev("aten::mm", shapes=[[32, 64], [64, 64]])) == "matmul"
    step = Ev("Optimizer.step#AdamW.step")
    assert mfu_breakdown.class_of(Ev("aten::mul_", step, shapes=[[2, 4, 16, 8]])) == "optimizer"
    backward = Ev("autograd::engine::evaluate_function: AddmmBackward0")
    assert mfu_breakdown.class_of(Ev("aten::sum", Ev("AddmmBackward0", backward), shapes=[[32, 64]])) == "matmul"
    assert mfu_breakdown.class_of(Ev("aten::copy_", shapes=[[32, 64]])) == "copies/views/other ops"


def _tiny(tmp_path, name):
    objective, model = MODELS[name]
    wl = tmp_path / f"{name}.wl"
    wl.write_text(TINY.format(name=name, objective=objective, model=model))
    return wl


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_what_if_arm_takes_the_fused_attention_kernel_and_counts_the_same_flops(tmp_path, name):
    wl = _tiny(tmp_path, name)
    eager = mfu_breakdown.Workload(wl, "worker")
    what_if = mfu_breakdown.Workload(wl, "worker", attention_dropout=0.0)
    # the same model (class, weights from the job's seed), only its attention dropout differs
    assert type(what_if.model) is type(eager.model)
    for (k, a), (_, b) in zip(eager.model.state_dict().items(), what_if.model.state_dict().items(), strict=True):
        assert a.equal(b), k
    keys = [k for k in mfu_breakdown.ATTENTION_DROPOUT_KEYS if hasattr(eager.model.config, k)]
    assert keys and all(getattr(eager.model.config, k) > 0 for k in keys)
    assert all(getattr(what_if.model.config, k) == 0 for k in keys)

    r_eager = mfu_breakdown.breakdown(eager, warmup=1, steps=2, peak=1e11)
    r_what_if = mfu_breakdown.breakdown(what_if, warmup=1, steps=2, peak=1e11)
    # torch's CPU sdpa: the math path with dropout, its fused kernel without
    assert r_eager["sdpa_kernels"] == ["_scaled_dot_product_attention_math"]
    assert r_what_if["sdpa_kernels"] == ["_scaled_dot_product_flash_attention_for_cpu"]
    # the fused kernel's FLOPs are counted, as many as the math path's bmm
    assert math.isclose(r_what_if["flops_per_step"], r_eager["flops_per_step"], rel_tol=1e-9)
    assert "WHAT-IF" in r_what_if["arm"] and "WHAT-IF" not in r_eager["arm"]


@pytest.mark.slow
def test_compiled_arm_compiles_in_warmup_only_and_its_kernels_are_a_class(tmp_path):
    wl = _tiny(tmp_path, "gpt2")
    eager = mfu_breakdown.breakdown(mfu_breakdown.Workload(wl, "worker"), warmup=1, steps=2, peak=1e11)
    w = mfu_breakdown.Workload(wl, "worker", compile=True)
    assert w.compiled and w.arm == "compiled"
    r = mfu_breakdown.breakdown(w, warmup=2, steps=2, peak=1e11)
    assert r["compile"]["warmup_compiles"] >= 1 and r["compile"]["recompiles"] == 0
    rows = {row["class"]: row for row in r["classes"]}
    assert math.isclose(sum(row["share"] for row in rows.values()), 1.0, rel_tol=1e-9)
    # inductor's fused kernels took time; the GEMMs it calls out to are still matmul
    assert rows["compiled graph"]["seconds"] > 0 and rows["matmul"]["seconds"] > 0
    assert eager_rows_compiled_share(eager) == 0
    # FLOPs are counted on the eager path (Dynamo leaves a frame alone under FlopCounterMode)
    assert math.isclose(r["flops_per_step"], eager["flops_per_step"], rel_tol=1e-9)


def eager_rows_compiled_share(r):
    return next(row["share"] for row in r["classes"] if row["class"] == "compiled graph")

"""The worker's FLOP counter counts attention whichever sdpa kernel the CPU takes.

With attention dropout 0 the CPU runs sdpa's fused kernel, for which torch's FlopCounterMode
has no formula: the same model counted fewer FLOPs than with dropout (the math path), and its
MFU read low.  ``accelctl.worker.flops.counter`` counts both the same."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from accelctl.worker import flops  # noqa: E402


def _bert(attention_dropout: float):
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, attention_probs_dropout_prob=attention_dropout,
                                     hidden_dropout_prob=0.0, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(config).train()


def _step_flops(model, mode) -> int:
    ids = torch.randint(5, 100, (2, 32))
    with mode as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    return counter.get_total_flops()


def _kernels(model) -> set[str]:
    ids = torch.randint(5, 100, (2, 32))
    with torch.profiler.profile() as prof:
        model(input_ids=ids, labels=ids).loss.backward()
    return {e.name for e in prof.events() if "scaled_dot_product" in e.name}


def test_a_step_on_the_fused_cpu_kernel_counts_the_flops_of_the_math_path():
    fused, math_path = _bert(0.0), _bert(0.1)
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in _kernels(fused)
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in _kernels(math_path)
    counted = _step_flops(fused, flops.counter())
    assert counted == _step_flops(math_path, flops.counter()) == _step_flops(math_path, FlopCounterMode(display=False))
    # what torch's own counter misses on the fused kernel: the attention products, forward and backward
    missed = counted - _step_flops(fused, FlopCounterMode(display=False))
    per_layer = 2 * 2 * 2 * 4 * 32 * 32 * 16  # 2 products x 2 FLOP/MAC x batch 2 x 4 heads x 32^2 x head dim 16
    assert missed == 2 * 3 * per_layer  # 2 layers, forward + backward (2x)

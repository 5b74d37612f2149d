"""BERT 4x256 (ffn 1024, vocab 1000) masked LM, seq 128, batch 4: ``accelctl run`` vs a bare transformers loop.

The baseline is the loop as a user writes it (``torch.optim.AdamW(params, lr)``, torch's
for-loop kernel on CPU); ``bert_step_fused`` reuses ``bert_setup`` with the optimizer
accelctl's worker builds.
"""

from pathlib import Path

from bench.comparisons._train import train_setup
from bench.harness import Comparison, Setup

SHAPE = ["--layers", "4", "--hidden", "256", "--heads", "4", "--vocab", "1000", "--seq", "128", "--batch", "4"]
#: the baselines' intermediate size is 4 x hidden and their position table 512
ARCH = {"layers": 4, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000, "max_positions": 512}


def bert_setup(quick: bool, workdir: Path, optimizer_flags: tuple[str, ...] = (),
               b_label: str = "bare transformers loop (bench/baselines/bert_mlm.py)") -> Setup:
    """bench/workloads/bert_mlm.wl against bench/baselines/bert_mlm.py of the same shape."""
    return train_setup(quick, workdir, "bert_mlm.wl", "bert_mlm.py", [*SHAPE, *optimizer_flags], b_label, ARCH)


COMPARISON = Comparison(
    name="bert_step", title="BERT MLM 4x256 seq 128 step, batch 4 vs bare transformers loop",
    setup=bert_setup, pairs=6, quick_pairs=2)

"""GPT-2 4x256 (ffn 4 x hidden, vocab 1000, 512 positions) causal LM, seq 128, batch 4:
``accelctl run`` vs a bare transformers loop with the plain ``torch.optim.AdamW(params, lr)``
a user writes (as ``bert_step``).

``gpt2(...)`` takes no ``ffn``: the worker passes ``n_inner=None`` and the baseline leaves it
out, so both get GPT2Config's 4 x hidden; the job's architecture has no ``ffn`` to check,
every other dimension is checked.  12 measured steps a run (``SHORT``): ~50 s for 6 pinned pairs.
"""

from pathlib import Path

from bench.comparisons._train import SHORT, train_setup
from bench.harness import Comparison, Setup

SHAPE = ["--layers", "4", "--hidden", "256", "--heads", "4", "--vocab", "1000", "--seq", "128", "--batch", "4"]
#: the baseline's position table: max(512, seq)
ARCH = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 1000, "max_positions": 512}


def gpt2_setup(quick: bool, workdir: Path) -> Setup:
    return train_setup(quick, workdir, "gpt2_clm.wl", "gpt2_clm.py", SHAPE,
                       "bare transformers loop (bench/baselines/gpt2_clm.py)", ARCH, full=SHORT)


COMPARISON = Comparison(
    name="gpt2_step", title="GPT-2 CLM 4x256 seq 128 step, batch 4 vs bare transformers loop",
    setup=gpt2_setup, pairs=6, quick_pairs=2)

"""BERT 4x256 (ffn 1024, vocab 1000) masked LM, seq 128, batch 4: ``accelctl run`` vs a bare transformers loop."""

from bench.comparisons._train import train_setup
from bench.harness import Comparison

SHAPE = ["--layers", "4", "--hidden", "256", "--heads", "4", "--vocab", "1000", "--seq", "128", "--batch", "4"]
#: the baselines' intermediate size is 4 x hidden and their position table 512
ARCH = {"layers": 4, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000, "max_positions": 512}

COMPARISON = Comparison(
    name="bert_step", title="BERT MLM 4x256 seq 128 step, batch 4 vs bare transformers loop",
    setup=lambda quick, workdir: train_setup(quick, workdir, "bert_mlm.wl", "bert_mlm.py", SHAPE,
                                             "bare transformers loop (bench/baselines/bert_mlm.py)", ARCH),
    quick_pairs=2)

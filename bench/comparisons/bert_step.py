"""BERT 4x256 masked LM, seq 128, batch 4: ``accelctl run`` vs a bare transformers loop."""

from bench.comparisons._train import train_setup
from bench.harness import Comparison

SHAPE = ["--layers", "4", "--hidden", "256", "--heads", "4", "--vocab", "30522", "--seq", "128", "--batch", "4"]

COMPARISON = Comparison(
    name="bert_step", title="BERT MLM 4x256 seq 128 step, batch 4 vs bare transformers loop",
    setup=lambda quick, workdir: train_setup(quick, workdir, "bert_mlm.wl", "bert_mlm.py", SHAPE,
                                             "bare transformers loop (bench/baselines/bert_mlm.py)"),
    quick_pairs=2)

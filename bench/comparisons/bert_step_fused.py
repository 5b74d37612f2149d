"""The BERT of ``bert_step``, like for like: the bare loop builds the optimizer accelctl's
worker builds for a CPU job (``accelctl/worker/devices.py`` ``make_optimizer``): torch's
fused AdamW, and the workload's weight decay (``adamw(lr = 0.001)``: 0), where a plain
``torch.optim.AdamW(params, lr)`` gets the for-loop kernel and weight decay 0.01.  So the
ratio is accelctl's own overhead, not the fused kernel's gain (``bert_step`` keeps showing
what a user's plain loop gets)."""

from bench.comparisons.bert_step import bert_setup
from bench.harness import Comparison

#: the baseline flags that build accelctl's CPU optimizer for bench/workloads/bert_mlm.wl
LIKE_ACCELCTL_OPTIMIZER = ("--fused-adamw", "--weight-decay", "0")

COMPARISON = Comparison(
    name="bert_step_fused", title="BERT MLM step, like for like: bare loop with fused AdamW",
    setup=lambda quick, workdir: bert_setup(
        quick, workdir, LIKE_ACCELCTL_OPTIMIZER,
        "bare transformers loop, fused AdamW (bench/baselines/bert_mlm.py --fused-adamw --weight-decay 0)"),
    pairs=10, quick_pairs=2)

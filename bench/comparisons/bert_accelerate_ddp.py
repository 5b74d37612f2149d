"""The BERT of ``bert_step`` on 2 ranks of plain DDP (gloo, one thread each): ``accelctl run``
of bench/workloads/bert_ddp.wl (torchrun) vs ``accelerate launch`` of the loop written the
Accelerate way (bench/baselines/accelerate_bert.py), batch 4 per rank, 3 warm-up + 15 steps.

Accelerate 1.15 spreads CPU ranks over one machine only through its ``--multi_gpu`` launcher
(torchrun); ``--cpu --num_processes 2`` would start a single process, which
``--expect-processes 2`` refuses.  The script's ``Accelerator(cpu=True)`` then runs
``MULTI_CPU``: gloo, DDP.  Both arms build the optimizer accelctl's CPU worker builds (fused
AdamW, weight decay 0: ``bert_step_fused``), so the ratio is the launch and loop, not the
optimizer kernel.  Both use both cores: the pairs are interleaved, never pinned.  Needs the
``bench`` extra; otherwise reported as not run.
"""

import sys

from bench.comparisons._train import train_setup
from bench.comparisons.bert_accelerate import unavailable
from bench.comparisons.bert_step import ARCH, SHAPE
from bench.comparisons.bert_step_fused import LIKE_ACCELCTL_OPTIMIZER
from bench.harness import Comparison

RANKS = 2
LAUNCH = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--multi_gpu",
          "--num_processes", str(RANKS), "--num_machines", "1", "--num_cpu_threads_per_process", "1",
          "--main_process_port", "0", "--mixed_precision", "no", "--dynamo_backend", "no"]
#: ~35 s a pair on the 2-core lab machine: fewer measured steps than FULL's 20
FULL = {"warmup": 3, "steps": 15}


def _setup(quick, workdir):
    return train_setup(quick, workdir, "bert_ddp.wl", "accelerate_bert.py",
                       [*SHAPE, *LIKE_ACCELCTL_OPTIMIZER, "--expect-processes", str(RANKS)],
                       "accelerate launch --multi_gpu, 2 CPU ranks (bench/baselines/accelerate_bert.py)", ARCH,
                       launcher=LAUNCH, pinnable=False, full=FULL)


COMPARISON = Comparison(
    name="bert_accelerate_ddp", title="BERT MLM step, 2 ranks DDP (gloo) vs accelerate launch, both fused AdamW",
    setup=_setup, pairs=4, quick_pairs=1, unavailable=unavailable)

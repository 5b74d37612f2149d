"""The same BERT, one process: ``accelctl run`` vs ``accelerate launch --cpu`` of the loop
written the Accelerate way.  Needs the ``bench`` extra; otherwise reported as not run."""

import importlib.util
import sys

from bench.comparisons._train import train_setup
from bench.comparisons.bert_step import ARCH, SHAPE
from bench.harness import Comparison

LAUNCH = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--cpu", "--num_processes", "1",
          "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


def unavailable() -> str | None:
    if importlib.util.find_spec("accelerate") is None:
        return "accelerate not installed (pip install -e '.[bench]' -c scripts/constraints.txt)"
    return None


COMPARISON = Comparison(
    name="bert_accelerate", title="BERT MLM step, 1 process vs accelerate launch --cpu",
    setup=lambda quick, workdir: train_setup(quick, workdir, "bert_mlm.wl", "accelerate_bert.py", SHAPE,
                                             "accelerate launch --cpu (bench/baselines/accelerate_bert.py)", ARCH,
                                             launcher=LAUNCH),
    pairs=4, quick_pairs=2, unavailable=unavailable)

"""Cold ``accelctl plan`` of one bench workload vs the ``import lark, rich`` floor."""

from bench.comparisons._cli import cli_setup
from bench.harness import Comparison

COMPARISON = Comparison(
    name="cli_plan", title="cold plan vs import lark, rich",
    setup=lambda quick, workdir: cli_setup(["plan", "bench/workloads/bert_mlm.wl"],
                                           "accelctl plan bench/workloads/bert_mlm.wl", workdir),
    pairs=12, quick_pairs=3)

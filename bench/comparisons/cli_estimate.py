"""Cold ``accelctl estimate`` of one bench workload vs the ``import lark, rich`` floor (issue 12:
cold ``validate`` / ``plan`` / ``estimate`` against the floor)."""

from bench.comparisons._cli import cli_setup
from bench.harness import Comparison

COMPARISON = Comparison(
    name="cli_estimate", title="cold estimate vs import lark, rich",
    setup=lambda quick, workdir: cli_setup(["estimate", "bench/workloads/bert_mlm.wl"],
                                           "accelctl estimate bench/workloads/bert_mlm.wl", workdir),
    pairs=12, quick_pairs=3)

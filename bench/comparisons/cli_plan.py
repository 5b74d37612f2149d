"""Cold ``accelctl plan`` of one bench workload vs the ``import lark, rich`` floor.

Measured 2026-11-23 (load 3.8-4.5 on 2 cores, 12 interleaved pairs, two sessions each,
alternating): 1.513 / 1.511 before the plug-in tables loaded lazily, 1.280 / 1.249 after
(docs/bench.md, "Cold plan / validate / estimate").  The rest of the gap is mostly dataclass
creation in our own modules (``spec.types``, ``contract.job``, ``contract.plan``).
"""

from bench.comparisons._cli import cli_setup
from bench.harness import Comparison

COMPARISON = Comparison(
    name="cli_plan", title="cold plan vs import lark, rich",
    setup=lambda quick, workdir: cli_setup(["plan", "bench/workloads/bert_mlm.wl"],
                                           "accelctl plan bench/workloads/bert_mlm.wl", workdir),
    pairs=12, quick_pairs=3)

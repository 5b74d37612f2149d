"""Cold ``accelctl validate`` of the shipped and bench workload files vs the ``import lark, rich`` floor."""

from bench.comparisons._cli import cli_setup
from bench.harness import ROOT, Comparison


def _setup(quick, workdir):
    files = sorted(str(p.relative_to(ROOT)) for p in (*(ROOT / "workloads").glob("*.wl"),
                                                       *(ROOT / "bench" / "workloads").glob("*.wl")))
    return cli_setup(["validate", *files], "accelctl validate workloads/*.wl bench/workloads/*.wl", workdir)


COMPARISON = Comparison(name="cli_validate", title="cold validate vs import lark, rich",
                        setup=_setup, pairs=12, quick_pairs=3)

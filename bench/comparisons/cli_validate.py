"""Cold ``accelctl validate`` of the shipped and bench workload files vs the ``import lark, rich`` floor:
wall time (``cli_validate``) and instructions executed (``cli_validate_ir``, valgrind: what load does not
change)."""

from bench.comparisons._cli import cli_setup, no_valgrind
from bench.harness import ROOT, Comparison


def validate_args() -> list[str]:
    files = sorted(str(p.relative_to(ROOT)) for p in (*(ROOT / "workloads").glob("*.wl"),
                                                       *(ROOT / "bench" / "workloads").glob("*.wl")))
    return ["validate", *files]


LABEL = "accelctl validate workloads/*.wl bench/workloads/*.wl"


def _setup(quick, workdir):
    return cli_setup(validate_args(), LABEL, workdir)


def _setup_ir(quick, workdir):
    return cli_setup(validate_args(), LABEL, workdir, count_instructions=True)


COMPARISON = Comparison(name="cli_validate", title="cold validate vs import lark, rich",
                        setup=_setup, pairs=12, quick_pairs=3)
#: a run under callgrind takes ~40x its wall time: 3 pairs (the count varies by ~0.1 %)
COMPARISON_IR = Comparison(name="cli_validate_ir", title="cold validate vs import lark, rich: instructions",
                           setup=_setup_ir, pairs=3, quick_pairs=3, unavailable=no_valgrind)

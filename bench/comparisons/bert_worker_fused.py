"""``bert_step_fused`` without CLI and runner: accelctl's worker alone, started on the job
``accelctl plan`` renders for bench/workloads/bert_mlm.wl (planned once per session, one
fresh run folder per run), against the same bare loop with the worker's optimizer.

Its ratio is the worker's own step overhead; ``bert_step_fused`` (CLI + runner + worker vs
the same loop) minus this one is what the runner adds to a step.  20 measured steps a run,
as ``bert_step_fused`` (12 widened the step spread to 0.96-1.11): ~55 s for 6 pinned pairs.
"""

from pathlib import Path

from bench.accelctl_arm import planned_job, run_worker
from bench.baseline_arm import run_baseline
from bench.comparisons._train import METRICS, sized_pair
from bench.comparisons.bert_step import ARCH, SHAPE
from bench.comparisons.bert_step_fused import LIKE_ACCELCTL_OPTIMIZER
from bench.harness import Comparison, Setup


def worker_setup(quick: bool, workdir: Path) -> Setup:
    wl, args = sized_pair(quick, workdir, "bert_mlm.wl", [*SHAPE, *LIKE_ACCELCTL_OPTIMIZER])
    job, env = planned_job(wl)
    return Setup(a=lambda core: run_worker(job, env, workdir, core, expect=ARCH),
                 b=lambda core: run_baseline("bert_mlm.py", args, core),
                 a_label="python -m accelctl.worker job.json (bert_mlm.wl's planned job; no CLI, no runner)",
                 b_label="bare transformers loop, fused AdamW "
                         "(bench/baselines/bert_mlm.py --fused-adamw --weight-decay 0)",
                 metrics=METRICS)


COMPARISON = Comparison(
    name="bert_worker_fused", title="BERT MLM step, worker alone (no CLI, no runner) vs bare loop, fused AdamW",
    setup=worker_setup, pairs=6, quick_pairs=2)

"""A Llama 4x256 causal LM (4 heads, ffn 688, vocab 1000, untied head), seq 128, micro-batch 4
per rank, on 2 gloo ranks of one thread each, FSDP2: ``accelctl run bench/workloads/llama_2ranks.wl
-t fsdp`` (torchrun, the worker's per-block ``fully_shard``) vs a bare torchrun script that
shards the same model with torch's ``fully_shard`` itself (bench/baselines/llama_parallel.py).

Both arms train one model on one stream of batches (the same weights from seed 0 and the same
token blocks per rank: their loss curves are equal, tests/test_bench.py) with the same
optimizer (fused AdamW, weight decay 0: what accelctl's CPU worker builds when every parameter
is a DTensor), so the step ratio is the worker's step against torch's, FSDP's all-gathers and
reduce-scatters in both.  What accelctl's step adds: the scalar all-reduce of the loss (every
rank logs the global loss and stops at the same step on a NaN).  Both arms use both cores: the
pairs are interleaved, never pinned.  12 measured steps a run (``SHORT``).
"""

from pathlib import Path

from bench.comparisons._train import SHORT, torchrun, train_setup
from bench.harness import Comparison, Setup

RANKS = 2
SHAPE = ["--layers", "4", "--hidden", "256", "--heads", "4", "--ffn", "688", "--vocab", "1000",
         "--max-positions", "512", "--seq", "128", "--batch", "4", "--weight-decay", "0"]
ARCH = {"layers": 4, "hidden": 256, "heads": 4, "ffn": 688, "vocab": 1000, "max_positions": 512, "tied": False}
#: what the worker's CPU optimizer is under each layout (``CpuAdapter.fused_adam``)
OPTIMIZER = {"fsdp": ["--fused-adamw"], "tp": []}
LABEL = {"fsdp": "fully_shard", "tp": "parallelize_module (tp = 2)"}


def parallel_setup(parallel: str, quick: bool, workdir: Path) -> Setup:
    """The comparison of the workload's target ``parallel`` (``fsdp`` or ``tp``) against the
    bare script's ``--parallel`` of the same name."""
    return train_setup(quick, workdir, "llama_2ranks.wl", "llama_parallel.py",
                       [*SHAPE, "--parallel", parallel, *OPTIMIZER[parallel]],
                       f"bare torchrun + torch's {LABEL[parallel]}, {RANKS} ranks (bench/baselines/llama_parallel.py)",
                       ARCH, launcher=torchrun(RANKS), pinnable=False, full=SHORT, target=parallel)


COMPARISON = Comparison(
    name="llama_fsdp", title="Llama 4x256 FSDP2, 2 gloo ranks vs bare torchrun + fully_shard",
    setup=lambda quick, workdir: parallel_setup("fsdp", quick, workdir), pairs=4, quick_pairs=3)

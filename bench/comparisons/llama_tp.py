"""``llama_fsdp``'s model and batches under tensor parallel (tp = 2 over the 2 gloo ranks: both
read one data shard, 4 samples a step): ``accelctl run bench/workloads/llama_2ranks.wl -t tp``
(the worker applies ``accelctl/models/parallel_plans.py``'s llama plan) vs the bare torchrun
script's own ``parallelize_module`` with the same split (q/k/v, gate, up column-wise; o, down
row-wise).  The optimizer is torch's plain AdamW in both (the fused kernel takes one tensor
kind per call; the split weights are DTensors, the norms and embeddings plain tensors).
Interleaved pairs, 12 measured steps a run.
"""

from bench.comparisons.llama_fsdp import parallel_setup
from bench.harness import Comparison

COMPARISON = Comparison(
    name="llama_tp", title="Llama 4x256 tensor parallel, 2 gloo ranks vs bare torchrun + parallelize_module",
    setup=lambda quick, workdir: parallel_setup("tp", quick, workdir), pairs=4, quick_pairs=3)

"""Bare ``deepspeed.initialize`` ZeRO-2 training of a BERT masked LM, one rank per process
(gloo, CPU).  Started by torchrun:

    DS_ACCELERATOR=cpu python -m torch.distributed.run --nproc-per-node 2 bench/baselines/ds_zero2.py --steps 20

The one non-default: DeepSpeed's shared-memory all-reduce is marked incompatible before the
process group exists (its first use JIT-builds a C++ op for minutes on CPU, and training
never uses it) -- the same switch a user would have to find.
"""

from __future__ import annotations

import itertools
import os

import torch

from _bert import bert_args, bert_mlm
from _common import adamw, leave, report, timed_steps

args = bert_args()

import deepspeed  # noqa: E402
import deepspeed.ops  # noqa: E402

deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
torch.set_num_threads(args.threads)
rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
torch.manual_seed(0)
model = bert_mlm(args)
opt = adamw(model.parameters(), args)
ds_config = {"train_batch_size": args.batch * world, "train_micro_batch_size_per_gpu": args.batch,
             "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}, "steps_per_print": 10**9}
engine, *_ = deepspeed.initialize(model=model, optimizer=opt, model_parameters=model.parameters(), config=ds_config)
g = torch.Generator().manual_seed(rank)
pool = [torch.randint(5, min(args.vocab, 133), (args.batch, args.seq), generator=g) for _ in range(8)]
blocks = itertools.cycle(pool)
MASK = 3


def step():
    ids = next(blocks)
    chosen = torch.rand(ids.shape) < 0.15
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = torch.where(chosen, torch.full_like(ids, MASK), ids)
    loss = engine(input_ids=inputs, attention_mask=torch.ones_like(ids), labels=labels).loss
    engine.backward(loss)
    engine.step()


times = timed_steps(step, args.warmup, args.steps)
if rank == 0:
    report(times)
torch.distributed.barrier()
leave()

"""Bare transformers GPT-2 causal-LM training loop (random weights, synthetic token blocks,
labels = the input ids: ``GPT2LMHeadModel`` shifts them itself).  Prints the model's
parameter count beside the step times (tests/test_bench.py compares it with the worker's).

    python bench/baselines/gpt2_clm.py --layers 4 --hidden 256 --heads 4 --seq 128 --batch 4 --steps 20

The feed-forward size is left to ``GPT2Config`` (``n_inner=None``: 4 x hidden), as accelctl's
worker leaves it for a workload that writes none (``gpt2(...)`` takes no ``ffn``).
"""

from __future__ import annotations

import itertools

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from _common import adamw, loop_args, report, timed_steps

args = loop_args()

torch.set_num_threads(args.threads)
torch.manual_seed(0)
config = GPT2Config(vocab_size=args.vocab, n_positions=max(512, args.seq), n_embd=args.hidden,
                    n_layer=args.layers, n_head=args.heads)
model = GPT2LMHeadModel(config).train()
opt = adamw(model.parameters(), args)
pool = [torch.randint(0, args.vocab, (args.batch, args.seq)) for _ in range(8)]
blocks = itertools.cycle(pool)


def step():
    ids = next(blocks)
    opt.zero_grad(set_to_none=True)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids)
    out.loss.backward()
    opt.step()


report(timed_steps(step, args.warmup, args.steps), params=sum(p.numel() for p in model.parameters()))

"""Bare transformers BERT masked-LM training loop (random weights, synthetic token blocks,
15 % of the tokens masked per step).

    python bench/baselines/bert_mlm.py --layers 4 --hidden 256 --heads 4 --seq 128 --batch 4 --steps 20
"""

from __future__ import annotations

import itertools

import torch

from _bert import bert_args, bert_mlm
from _common import adamw, report, timed_steps

args = bert_args()

torch.set_num_threads(args.threads)
torch.manual_seed(0)
model = bert_mlm(args)
opt = adamw(model.parameters(), args)
MASK = 3
pool = [torch.randint(5, min(args.vocab, 133), (args.batch, args.seq)) for _ in range(8)]
blocks = itertools.cycle(pool)


def step():
    ids = next(blocks)
    chosen = torch.rand(ids.shape) < 0.15
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = torch.where(chosen, torch.full_like(ids, MASK), ids)
    opt.zero_grad(set_to_none=True)
    out = model(input_ids=inputs, attention_mask=torch.ones_like(ids), labels=labels)
    out.loss.backward()
    opt.step()


report(timed_steps(step, args.warmup, args.steps))

"""The BERT masked-LM loop written the Accelerate way, run by ``accelerate launch --cpu``:

    accelerate launch --cpu --num_processes 1 bench/baselines/accelerate_bert.py --steps 20

Needs the ``bench`` extra (accelerate); ``python -m bench`` reports this comparison as not
run when accelerate is not installed.
"""

from __future__ import annotations

import itertools

import torch
from accelerate import Accelerator

from _bert import bert_args, bert_mlm
from _common import adamw, report, timed_steps

args = bert_args()

torch.set_num_threads(args.threads)
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = bert_mlm(args)
opt = adamw(model.parameters(), args)
model, opt = accelerator.prepare(model, opt)
g = torch.Generator().manual_seed(accelerator.process_index)
pool = [torch.randint(5, min(args.vocab, 133), (args.batch, args.seq), generator=g) for _ in range(8)]
blocks = itertools.cycle(pool)
MASK = 3


def step():
    ids = next(blocks)
    chosen = torch.rand(ids.shape) < 0.15
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = torch.where(chosen, torch.full_like(ids, MASK), ids)
    opt.zero_grad(set_to_none=True)
    loss = model(input_ids=inputs, attention_mask=torch.ones_like(ids), labels=labels).loss
    accelerator.backward(loss)
    opt.step()


times = timed_steps(step, args.warmup, args.steps)
if accelerator.is_main_process:
    report(times)

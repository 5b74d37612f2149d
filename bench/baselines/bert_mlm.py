"""Bare transformers BERT masked-LM training loop (random weights, synthetic token blocks,
15 % of the tokens masked per step).

    python bench/baselines/bert_mlm.py --layers 4 --hidden 256 --heads 4 --seq 128 --batch 4 --steps 20
"""

from __future__ import annotations

import argparse
import itertools

import torch
from transformers import BertConfig, BertForMaskedLM

from _common import report, timed_steps

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--hidden", type=int, default=256)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--vocab", type=int, default=1000)
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--threads", type=int, default=1)
args = ap.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(0)
config = BertConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                    num_attention_heads=args.heads, intermediate_size=4 * args.hidden,
                    max_position_embeddings=max(512, args.seq), pad_token_id=0)
model = BertForMaskedLM(config).train()
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
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

"""Bare timm ViT classification training loop (random weights, synthetic images).

    python bench/baselines/timm_vit.py --layers 12 --hidden 192 --heads 3 --batch 2 --steps 20 [--compile]

``--compile``: ``model.compile()`` (torch.compile, inductor, default mode) before the loop,
as a user would write it; compilation happens in the first (warm-up) step.
``--fused-adamw`` / ``--weight-decay``: the optimizer accelctl's worker builds (``_common.adamw``).
"""

from __future__ import annotations

import argparse
import itertools

import torch
from timm.models.vision_transformer import VisionTransformer

from _common import add_optimizer_args, adamw, report, timed_steps

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=12)
ap.add_argument("--hidden", type=int, default=192)
ap.add_argument("--heads", type=int, default=3)
ap.add_argument("--image-size", type=int, default=224)
ap.add_argument("--patch", type=int, default=16)
ap.add_argument("--classes", type=int, default=1000)
ap.add_argument("--batch", type=int, default=2)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--compile", action="store_true")
add_optimizer_args(ap)
args = ap.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(0)
model = VisionTransformer(img_size=args.image_size, patch_size=args.patch, num_classes=args.classes,
                          embed_dim=args.hidden, depth=args.layers, num_heads=args.heads).train()
if args.compile:
    model.compile()
opt = adamw(model.parameters(), args)
pool = [(torch.randn(args.batch, 3, args.image_size, args.image_size),
         torch.randint(0, args.classes, (args.batch,))) for _ in range(8)]
batches = itertools.cycle(pool)
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    x, y = next(batches)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()


report(timed_steps(step, args.warmup, args.steps))

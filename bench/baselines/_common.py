"""Shared by the bare baselines (not accelctl): their command line, AdamW, timing a loop and printing its result.

``timed_steps(step, warmup, steps)`` calls ``step()`` warmup + steps times and returns the
measured steps' seconds (warm-up excluded), the way a user would time a loop by hand.

``adamw(params, args)`` is the baseline's optimizer.  By default it is what a plain loop
writes, ``torch.optim.AdamW(params, lr)``: torch's for-loop kernel on CPU, weight decay 0.01.
``--fused-adamw --weight-decay 0`` (``add_optimizer_args``) build what accelctl's worker
builds for a CPU job (torch's fused kernel, the workload's weight decay, 0 unless written:
``accelctl/worker/devices.py`` ``make_optimizer``), for a like-for-like comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def loop_args(more=None) -> argparse.Namespace:
    """The command line of a transformer-LM baseline (BERT, GPT-2): model shape, batch,
    optimizer (``--lr``, and ``--fused-adamw`` / ``--weight-decay``: ``add_optimizer_args``)
    and loop lengths.  ``more(ap)`` adds a baseline's own options."""
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
    add_optimizer_args(ap)
    if more is not None:
        more(ap)
    return ap.parse_args()


def add_optimizer_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--fused-adamw", action="store_true", help="torch.optim.AdamW(..., fused=True)")
    ap.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (torch's default 0.01)")


def adamw(params, args: argparse.Namespace):
    """``torch.optim.AdamW`` with ``args.lr`` and ``args.weight_decay``; its fused kernel with
    ``--fused-adamw``, else torch's own choice (``fused=None``, its default)."""
    import torch

    return torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay,
                             fused=True if args.fused_adamw else None)


def timed_steps(step, warmup: int, steps: int) -> list[float]:
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
    return times


def leave() -> None:
    """End a rank after its last barrier as accelctl's worker ends one: output flushed, then
    ``os._exit(0)`` -- no C++ teardown of the gloo process group, which can abort a rank with
    SIGABRT after its last step under load."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def report(step_times: list[float], **extra) -> None:
    print(json.dumps({"step_times": step_times, **extra}), flush=True)
    sys.stdout.flush()

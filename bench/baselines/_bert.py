"""The BERT masked-LM shape shared by the BERT baselines (bare loop, ``accelerate launch``,
bare ``deepspeed.initialize``): one argument parser and one model builder, so the three
arms cannot drift from each other (the bench checks each against accelctl's ``job.json``).
"""

from __future__ import annotations

import argparse

from _common import add_optimizer_args


def bert_args(more=None) -> argparse.Namespace:
    """The command line of a BERT baseline: model shape, batch, optimizer (``--lr``, and
    ``--fused-adamw`` / ``--weight-decay``: ``_common.add_optimizer_args``) and loop lengths."""
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
    if more is not None:  # a baseline's own options: more(ap) adds them
        more(ap)
    return ap.parse_args()


def bert_mlm(args: argparse.Namespace):
    """A randomly initialised ``BertForMaskedLM`` of ``args``' shape, in training mode."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=4 * args.hidden,
                        max_position_embeddings=max(512, args.seq), pad_token_id=0)
    return BertForMaskedLM(config).train()

"""The BERT masked-LM shape shared by the BERT baselines (bare loop, ``accelerate launch``,
bare ``deepspeed.initialize``): one argument parser and one model builder, so the three
arms cannot drift from each other (the bench checks each against accelctl's ``job.json``).
"""

from __future__ import annotations

import argparse

from _common import loop_args


def bert_args(more=None) -> argparse.Namespace:
    """The command line of a BERT baseline: ``_common.loop_args`` (model shape, batch,
    optimizer and loop lengths); ``more(ap)`` adds a baseline's own options."""
    return loop_args(more)


def bert_mlm(args: argparse.Namespace):
    """A randomly initialised ``BertForMaskedLM`` of ``args``' shape, in training mode."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=4 * args.hidden,
                        max_position_embeddings=max(512, args.seq), pad_token_id=0)
    return BertForMaskedLM(config).train()

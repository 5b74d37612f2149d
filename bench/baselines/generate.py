"""Bare greedy generation with a transformers causal LM built from a config (random weights).

    python bench/baselines/generate.py --family bloom --layers 2 --hidden 64 --heads 4 \
        --prompt-tokens 41 --new-tokens 100 --warmup 2 --steps 5

``--repeat K`` runs K such processes one after the other (a file of K workloads).
"""

from __future__ import annotations

import argparse

import torch
import transformers

from _common import report, timed_steps

ap = argparse.ArgumentParser()
ap.add_argument("--family", choices=("bloom", "gpt2"), default="bloom")
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--hidden", type=int, default=64)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--vocab", type=int, default=250880)
ap.add_argument("--prompt-tokens", type=int, default=41)
ap.add_argument("--new-tokens", type=int, default=100)
ap.add_argument("--warmup", type=int, default=2)
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--static-cache", action="store_true", help='cache_implementation="static"')
args = ap.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(0)
ids = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
if args.family == "bloom":
    config = transformers.BloomConfig(vocab_size=args.vocab, hidden_size=args.hidden, n_layer=args.layers,
                                      n_head=args.heads, **ids)
    model = transformers.BloomForCausalLM(config).eval()
else:
    config = transformers.GPT2Config(vocab_size=args.vocab, n_embd=args.hidden, n_layer=args.layers,
                                     n_head=args.heads, **ids)
    model = transformers.GPT2LMHeadModel(config).eval()
prompt = torch.randint(4, 260, (1, args.prompt_tokens))
cache = {"cache_implementation": "static"} if args.static_cache else {}


def step():
    with torch.inference_mode():
        model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=args.new_tokens,
                       min_new_tokens=args.new_tokens, do_sample=False, num_beams=1, use_cache=True, pad_token_id=0,
                       **cache)


report(timed_steps(step, args.warmup, args.steps))

"""Batches for the loops: synthetic, local text files, or a Hub dataset with a local fallback.

Every batch has the same shape (a ragged last batch is dropped) so step times compare.
Each rank reads its own shard: synthetic data draws from a generator seeded with
``seed + rank``; file data takes every ``world``-th packed block.

Synthetic data is *learnable*, so a falling loss is a real signal that the optimizer,
the precision and the all-reduce work, not noise:
  * token sequences count upwards with a per-sequence stride (``x[t+1] = x[t] + s``)
    through a window of ``job.debug.synthetic_vocab`` (default 128) ids, so the next token (causal LM), a masked token (BERT) and a copied prefix (T5
    labels = the first ``target_len`` input tokens) are all predictable;
  * images are a per-class prototype plus noise, so the class is predictable;
  * each rank cycles through a fixed pool of ``job.debug.synthetic_pool`` (default 8)
    such batches, like a tiny epoch.  The compute per step is that of real data.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from accelctl.worker.models import CAUSAL_LM, IMAGE_CLASSIFIER, MASKED_LM, SEQ2SEQ, Built

Batch = dict[str, torch.Tensor]


class Batches:
    """An endless iterator of fixed-shape batches, plus what one sample counts as."""

    def __init__(self, it: Iterator[Batch], samples: int, tokens_per_sample: int, source: str) -> None:
        self._it = it
        self.samples = samples
        self.tokens_per_sample = tokens_per_sample
        self.source = source

    def __iter__(self) -> "Batches":
        return self

    def __next__(self) -> Batch:
        return next(self._it)


def training_batches(job, built: Built, rank: int, world: int, log: Callable[[str, str], None]) -> Batches:
    """The batch stream of ``job`` for this rank (``micro_batch`` samples each)."""
    kind, data = built.kind, job.data
    if kind == IMAGE_CLASSIFIER:
        if data.kind != "synthetic":
            raise ValueError(f"data kind {data.kind!r} is not implemented for images; use synthetic")
        return _synthetic_images(job, built, rank)
    if kind not in (CAUSAL_LM, MASKED_LM, SEQ2SEQ):
        raise ValueError(f"no training data for model kind {kind!r}")
    seq, tgt = data.seq_len, data.target_len if kind == SEQ2SEQ else 0
    texts, source = text_records(job, log)
    if texts is None:
        tokens = _counting_tokens(job, built, rank, seq, tgt)
    else:
        tokens = _packed_tokens(job, built, texts, rank, world, seq + tgt)
    return Batches(_lm_batches(job, built, tokens, seq, rank), job.batch.micro, seq + tgt, source)


# -- sources ---------------------------------------------------------------------------------

def text_records(job, log: Callable[[str, str], None]) -> tuple[list[str] | None, str]:
    """The job's text records (None for synthetic data) and where they came from."""
    data = job.data
    if data.kind == "synthetic":
        return None, "synthetic"
    if data.kind == "files":
        return read_text_files(data.ref, data.column), f"files:{data.ref}"
    if data.kind == "hf":
        try:
            return _hub_records(data.ref, data.column), f"hf:{data.ref}"
        except Exception as exc:  # noqa: BLE001 - every failure goes to the declared fallback
            synthetic = data.fallback in ("", "synthetic")
            where = "synthetic data" if synthetic else f"local files {data.fallback!r}"
            log("warning", f"dataset {data.ref!r} could not be loaded offline ({type(exc).__name__}: {exc}); "
                           f"using the fallback: {where}")
            if synthetic:
                return None, "synthetic (fallback)"
            return read_text_files(data.fallback, data.column), f"files:{data.fallback} (fallback)"
    raise ValueError(f"unknown data kind {data.kind!r} (synthetic, files, hf)")


def read_text_files(ref: str, column: str = "") -> list[str]:
    """Records of a .txt / .jsonl file, or of every such file in a folder (sorted)."""
    path = Path(ref).expanduser()
    if not ref or not path.exists():
        raise FileNotFoundError(f"data file or folder {ref!r} does not exist")
    files = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".jsonl")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"no .txt or .jsonl files under {ref!r}")
    records: list[str] = []
    for f in files:
        if f.suffix == ".jsonl":
            key = column or "text"
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip():
                    obj = json.loads(line)
                    if key not in obj:
                        raise KeyError(f"{f}:{n}: no column {key!r} (has {', '.join(obj)})")
                    records.append(str(obj[key]))
        elif f.suffix == ".txt":
            records.append(f.read_text(encoding="utf-8"))
        else:
            raise ValueError(f"{f}: only .txt and .jsonl text files are supported")
    return records


def _hub_records(ref: str, column: str) -> list[str]:
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets  # optional dependency: ImportError goes to the fallback

    ds = datasets.load_dataset(ref, split="train")
    key = column or next(c for c in ds.column_names if ds.features[c].dtype == "string")
    return [str(x) for x in ds[key]]


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


# -- token batches ---------------------------------------------------------------------------

def _counting_tokens(job, built: Built, rank: int, seq: int, tgt: int) -> Iterator[torch.Tensor]:
    """Pool of learnable (micro_batch, seq + tgt) id blocks, cycled (see module doc)."""
    tok = built.tokenizer
    low = getattr(tok, "SPECIALS", 5)  # keep clear of special ids
    # a small active vocabulary, like text's skewed one: learning which tokens occur is the
    # first, fast drop of the loss; learning the counting rule is the slow one
    span = min(_vocab(built) - low, job.debug.synthetic_vocab)
    g = torch.Generator().manual_seed(job.seed * 1000 + rank)
    pool = []
    for _ in range(job.debug.synthetic_pool):
        start = torch.randint(0, span, (job.batch.micro, 1), generator=g)
        stride = torch.randint(1, 4, (job.batch.micro, 1), generator=g)
        pos = torch.arange(seq + tgt).unsqueeze(0)
        block = low + (start + stride * pos) % span
        if tgt:  # seq2seq: the target is a copy of the input's first tokens
            block[:, seq:] = block[:, :tgt]
        pool.append(block)
    return itertools.cycle(pool)


def _packed_tokens(job, built: Built, texts: list[str], rank: int, world: int, block: int) -> Iterator[torch.Tensor]:
    """Records tokenised, joined with EOS, cut into ``block``-token rows; this rank's share."""
    tok = built.tokenizer
    eos = getattr(tok, "eos_token_id", None) or getattr(tok, "sep_token_id", None)
    ids: list[int] = []
    for text in texts:
        ids.extend(encode(tok, text))
        if eos is not None:
            ids.append(eos)
    rows = [ids[i:i + block] for i in range(0, len(ids) - block + 1, block)][rank::world]
    n_batches = len(rows) // job.batch.micro  # ragged last batch dropped
    if n_batches == 0:
        raise ValueError(f"data {job.data.ref or job.data.fallback!r} gives {len(ids)} tokens: too few for one batch of "
                         f"{job.batch.micro} x {block} tokens per rank ({world} ranks)")
    batches = [torch.tensor(rows[i * job.batch.micro:(i + 1) * job.batch.micro]) for i in range(n_batches)]
    return itertools.cycle(batches)


def _lm_batches(job, built: Built, tokens: Iterator[torch.Tensor], seq: int, rank: int) -> Iterator[Batch]:
    g = torch.Generator().manual_seed(job.seed * 1000 + rank + 7)
    for block in tokens:
        if built.kind == CAUSAL_LM:
            yield {"input_ids": block, "attention_mask": torch.ones_like(block), "labels": block}
        elif built.kind == SEQ2SEQ:
            inp, labels = block[:, :seq].contiguous(), block[:, seq:].contiguous()
            yield {"input_ids": inp, "attention_mask": torch.ones_like(inp), "labels": labels}
        else:
            inp, labels = mask_tokens(block, built.tokenizer, _vocab(built), job.data.mlm_probability, g)
            yield {"input_ids": inp, "attention_mask": torch.ones_like(inp), "labels": labels}


def mask_tokens(ids: torch.Tensor, tokenizer: Any, vocab: int, p: float, g: torch.Generator):
    """BERT masking: p of the positions are predicted (80% [MASK], 10% random, 10% kept);
    the other labels are -100 so the loss ignores them."""
    labels = ids.clone()
    chosen = torch.rand(ids.shape, generator=g) < p
    labels[~chosen] = -100
    inputs = ids.clone()
    masked = chosen & (torch.rand(ids.shape, generator=g) < 0.8)
    inputs[masked] = tokenizer.mask_token_id
    rand = chosen & ~masked & (torch.rand(ids.shape, generator=g) < 0.5)
    inputs[rand] = torch.randint(0, vocab, ids.shape, generator=g)[rand]
    return inputs, labels


def _vocab(built: Built) -> int:
    cfg = getattr(built.model, "config", None)
    return int(getattr(cfg, "vocab_size", None) or built.shape["vocab"])


# -- images ----------------------------------------------------------------------------------

def _synthetic_images(job, built: Built, rank: int) -> Batches:
    s = built.shape
    c, size, classes = int(s.get("channels", 3)), int(s["image_size"]), int(s["classes"])
    # prototypes are shared by all ranks (same task); samples and noise are per rank
    prototypes = torch.randn(classes, c, size, size, generator=torch.Generator().manual_seed(job.seed))
    g = torch.Generator().manual_seed(job.seed * 1000 + rank)
    pool = []
    for _ in range(job.debug.synthetic_pool):
        labels = torch.randint(0, classes, (job.batch.micro,), generator=g)
        images = prototypes[labels] + 0.5 * torch.randn(job.batch.micro, c, size, size, generator=g)
        pool.append({"pixel_values": images, "labels": labels})
    return Batches(itertools.cycle(pool), job.batch.micro, 0, "synthetic")


def prompt_ids(job, built: Built, log: Callable[[str, str], None]) -> Iterator[list[list[int]]]:
    """Prompts for generation, ``micro_batch`` per call, all of one length.

    From the dataset when one is given with ``prompt_tokens`` (seed 003: the first 16 tokens of
    each record), else ``task.prompt`` repeated; else ``prompt_tokens`` (or 8) counting ids.
    """
    tok, n, mb = built.tokenizer, job.data.prompt_tokens, job.batch.micro
    texts = text_records(job, log)[0] if job.data.kind != "synthetic" and n > 0 else None
    if texts is not None:
        rows = [ids[:n] for ids in (encode(tok, t) for t in texts) if len(ids) >= n]
        if len(rows) < mb:
            raise ValueError(f"only {len(rows)} records have {n} prompt tokens; need {mb} per batch")
        batches = [rows[i:i + mb] for i in range(0, len(rows) - mb + 1, mb)]
        return itertools.cycle(batches)
    if job.task.prompt:
        ids = encode(tok, job.task.prompt)
    else:
        low = getattr(tok, "SPECIALS", 5)
        ids = [low + i for i in range(n or 8)]
    return itertools.repeat([list(ids) for _ in range(mb)])

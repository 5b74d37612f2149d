"""Batches for the loops: synthetic, or the records of local files or a Hub dataset.

Every batch has the same shape (a ragged last batch is dropped) so step times compare.  Each rank
reads its own shard: synthetic data from a generator seeded with ``seed + rank``; real records
(``accelctl.worker.records``) a ``1/world`` share shuffled with the job's seed, tokenized as
consumed (the real tokenizer with real weights, else the stand-in's) and replayed like epochs.
Synthetic data is *learnable* (counting token sequences, per-class image prototypes, a fixed pool
per rank), so a falling loss shows the optimizer, precision and all-reduce work.
Row layouts per task: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Callable, Iterable, Iterator

import torch

from accelctl.contract import envnames
from accelctl.worker import records
from accelctl.worker.models import CAUSAL_LM, IMAGE_CLASSIFIER, MASKED_LM, SEQ2SEQ, Built

Batch = dict[str, torch.Tensor]
#: T5 sources, as the Transformers / Optimum Habana summarization examples prefix them
T5_PREFIX = "summarize: "


class Batches:
    """An endless iterator of fixed-shape batches, plus what one sample counts as."""

    def __init__(self, it: Iterator[Batch], samples: int, tokens_per_sample: int, source: str,
                 details: dict[str, Any] | None = None) -> None:
        self._it = it
        self.samples = samples
        self.tokens_per_sample = tokens_per_sample
        self.source = source
        #: what was read, for RunStarted: data, data_source, data_records ... (``records.Records``)
        self.details = {"data": source, **(details or {})}

    def __iter__(self) -> "Batches":
        return self

    def __next__(self) -> Batch:
        return next(self._it)


def training_batches(job, built: Built, rank: int, world: int, log: Callable[[str, str], None]) -> Batches:
    """The batch stream of ``job`` for this rank (``micro_batch`` samples each)."""
    batches = _training_batches(job, built, rank, world, log)
    every = int(os.environ.get(RAGGED_ENV, "0") or 0)
    if every > 0:
        log("warning", f"{RAGGED_ENV}={every}: every {every}th batch has half its samples (a test hook)")
        batches._it = _ragged(batches._it, every)
    return batches


#: test hook: every n-th batch keeps only half its samples, as an epoch's ragged last batch does
#: when a loader keeps it (``drop_last=False``) -- the shape change XLA recompiles for
RAGGED_ENV = envnames.DEBUG_RAGGED_BATCH_EVERY


def _ragged(it: Iterator[Batch], every: int) -> Iterator[Batch]:
    for i, batch in enumerate(it, 1):
        yield {k: v[: max(1, len(v) // 2)] for k, v in batch.items()} if i % every == 0 else batch


def _training_batches(job, built: Built, rank: int, world: int, log: Callable[[str, str], None]) -> Batches:
    kind, data = built.kind, job.data
    if kind not in (CAUSAL_LM, MASKED_LM, SEQ2SEQ, IMAGE_CLASSIFIER):
        raise ValueError(f"no training data for model kind {kind!r}")
    rec = records.load(job, rank, world, log)
    if kind == IMAGE_CLASSIFIER:
        if rec.synthetic:
            return _synthetic_images(job, built, rank, rec)
        if not rec.images:
            raise ValueError(f"{rec.source}: an image model needs images (an image folder, or a dataset with an "
                             f"image and a label column)")
        return Batches(_image_batches(job, built, rec), job.batch.micro, 0, rec.source, rec.details)
    if rec.images:
        raise ValueError(f"{rec.source} holds images; a {built.family} model reads text")
    seq, tgt = data.seq_len, data.target_len if kind == SEQ2SEQ else 0
    if rec.synthetic:
        blocks = _counting_tokens(job, built, rank, seq, tgt)
    elif kind == SEQ2SEQ and rec.target_column:
        return Batches(_pair_batches(job, built, rec, seq, tgt), job.batch.micro, seq + tgt, rec.source, rec.details)
    else:
        blocks = _packed_tokens(job, built, rec, seq + tgt)
    return Batches(_lm_batches(job, built, blocks, seq, rank), job.batch.micro, seq + tgt, rec.source, rec.details)


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def _replay(items: Iterable, empty: str) -> Iterator:
    """``items`` once, kept, then replayed forever; ``empty`` is the error when there are none.
    The first item is made now, so a shard too small for one batch fails at setup."""
    def gen(it: Iterator, first) -> Iterator:
        seen = [first]
        yield first
        for item in it:
            seen.append(item)
            yield item
        while True:
            yield from seen

    it = iter(items)
    first = next(it, None)
    if first is None:
        raise ValueError(empty)
    return gen(it, first)


def _too_few(job, rec: records.Records, what: str) -> str:
    return (f"data {rec.source} gives too few {what} for one batch of {job.batch.micro} on this rank "
            f"({rec.details.get('data_rank_records', '?')} records in its shard)")


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


def _packed_tokens(job, built: Built, rec: records.Records, block: int) -> Iterator[torch.Tensor]:
    """This rank's records tokenised, joined with EOS, cut into ``micro x block`` id batches."""
    tok, micro = built.tokenizer, job.batch.micro
    eos = getattr(tok, "eos_token_id", None) or getattr(tok, "sep_token_id", None)

    def blocks() -> Iterator[torch.Tensor]:
        ids: list[int] = []
        rows: list[list[int]] = []
        for row in records.rows(rec):
            ids.extend(encode(tok, str(row[rec.column])))
            if eos is not None:
                ids.append(eos)
            while len(ids) >= block:
                rows.append(ids[:block])
                del ids[:block]
                if len(rows) == micro:
                    yield torch.tensor(rows)
                    rows = []

    return _replay(blocks(), _too_few(job, rec, f"tokens ({block} per sample)"))


def _pair_batches(job, built: Built, rec: records.Records, seq: int, tgt: int) -> Iterator[Batch]:
    """Seq2seq from a source and a target column: one record per row, padded to
    ``seq`` / ``tgt`` tokens (EOS-terminated; padded labels are -100, out of the loss)."""
    tok, micro = built.tokenizer, job.batch.micro
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    prefix = T5_PREFIX if built.family == "t5" else ""

    def fit(ids: list[int], n: int, fill: int) -> tuple[list[int], int]:
        ids = ids[:n - len(eos)] + eos
        return ids + [fill] * (n - len(ids)), len(ids)

    def batches() -> Iterator[Batch]:
        src: list[list[int]] = []
        lens: list[int] = []
        lab: list[list[int]] = []
        for row in records.rows(rec):
            ids, n = fit(encode(tok, prefix + str(row[rec.column])), seq, pad)
            src.append(ids)
            lens.append(n)
            lab.append(fit(encode(tok, str(row[rec.target_column])), tgt, -100)[0])
            if len(src) == micro:
                mask = (torch.arange(seq)[None, :] < torch.tensor(lens)[:, None]).long()
                yield {"input_ids": torch.tensor(src), "attention_mask": mask, "labels": torch.tensor(lab)}
                src, lens, lab = [], [], []

    return _replay(batches(), _too_few(job, rec, "records"))


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
    """BERT masking: p of the positions are predicted (80% [MASK], 10% random, 10% kept); the
    other labels are -100 so the loss ignores them.  A sample that draws no position gets one at
    random: at short stand-in lengths a batch could otherwise have no label (loss nan); at BERT's
    lengths it practically never triggers, so the draws stay BERT's.
    """
    labels = ids.clone()
    chosen = torch.rand(ids.shape, generator=g) < p
    rows = (~chosen.any(dim=-1)).nonzero(as_tuple=True)[0]
    if len(rows):
        chosen[rows, torch.randint(0, ids.shape[-1], (len(rows),), generator=g)] = True
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

def _synthetic_images(job, built: Built, rank: int, rec: records.Records) -> Batches:
    s = built.shape
    c, size, classes = int(s.get("channels", 3)), int(s["image_size"]), int(s["classes"])
    # prototypes are shared by all ranks (same task); samples and noise are per rank
    prototypes = torch.randn(classes, c, size, size, generator=torch.Generator().manual_seed(job.seed))
    g = torch.Generator().manual_seed(job.seed * 1000 + rank)
    pool = []
    for _ in range(job.debug.synthetic_pool):
        labels = torch.randint(0, classes, (job.batch.micro,), generator=g)
        # in place: the pool stays in memory for the run, and a freed temporary between its
        # batches is a hole the heap keeps
        images = torch.randn(job.batch.micro, c, size, size, generator=g).mul_(0.5).add_(prototypes[labels])
        pool.append({"pixel_values": images, "labels": labels})
    return Batches(itertools.cycle(pool), job.batch.micro, 0, rec.source, rec.details)


def _image_batches(job, built: Built, rec: records.Records) -> Iterator[Batch]:
    """Images of this rank's records, resized to the model's ``image_size``, in [-1, 1]."""
    import numpy as np

    s = built.shape
    c, size, classes = int(s.get("channels", 3)), int(s["image_size"]), int(s["classes"])
    if c not in (1, 3):
        raise ValueError(f"images are read as RGB or grayscale, not {c} channels")
    names = getattr(rec.ds.features["label"], "names", None)
    if names is not None and len(names) > classes:
        raise ValueError(f"{rec.source} has {len(names)} classes; the model has {classes} outputs")

    def pixels(img) -> torch.Tensor:
        arr = np.asarray(img.convert("RGB" if c == 3 else "L").resize((size, size)), dtype=np.float32)
        t = torch.from_numpy(arr / 127.5 - 1.0)
        return t.permute(2, 0, 1) if c == 3 else t.unsqueeze(0)

    def batches() -> Iterator[Batch]:
        images: list[torch.Tensor] = []
        labels: list[int] = []
        for row in records.rows(rec, batch_size=64):
            images.append(pixels(row[rec.column]))
            labels.append(int(row["label"]))
            if len(images) == job.batch.micro:
                yield {"pixel_values": torch.stack(images), "labels": torch.tensor(labels)}
                images, labels = [], []

    return _replay(batches(), _too_few(job, rec, "images"))


# -- prompts ---------------------------------------------------------------------------------

def prompt_ids(job, built: Built, log: Callable[[str, str], None]) -> Batches:
    """Prompts for generation, ``micro_batch`` per call, all of one length: from the dataset when
    one is given with ``prompt_tokens`` (seed 003; every rank reads the same prompts), else
    ``task.prompt`` repeated, else ``prompt_tokens`` (or 8) counting ids.
    """
    tok, n, mb = built.tokenizer, job.data.prompt_tokens, job.batch.micro
    rec = records.load(job, 0, 1, log, shard=False) if job.data.kind != "synthetic" and n > 0 else None
    if rec is not None and not rec.synthetic:
        def batches() -> Iterator[list[list[int]]]:
            rows: list[list[int]] = []
            for row in records.rows(rec):
                ids = encode(tok, str(row[rec.column]))
                if len(ids) >= n:
                    rows.append(ids[:n])
                if len(rows) == mb:
                    yield rows
                    rows = []

        empty = f"{rec.source}: fewer than {mb} records have {n} prompt tokens (one batch)"
        return Batches(_replay(batches(), empty), mb, n, rec.source, rec.details)
    if job.task.prompt:
        ids = encode(tok, job.task.prompt)
    else:
        low = getattr(tok, "SPECIALS", 5)
        ids = [low + i for i in range(n or 8)]
    source, details = (rec.source, rec.details) if rec is not None else ("prompt", {})
    return Batches(itertools.repeat([list(ids) for _ in range(mb)]), mb, len(ids), source, details)

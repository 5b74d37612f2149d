"""A job's records through the ``datasets`` library: a Hub dataset, or local files.

Hub: ``load_dataset(id, config, split=...)`` with ``HF_DATASETS_OFFLINE=1`` unless the environment
says otherwise (the HF cache, never the network).  Local: ``json`` / ``csv`` / ``parquet`` /
``text`` by extension, or ``imagefolder``.  A Hub dataset that cannot load fails the run unless
the job has a ``fallback`` (host-CPU targets only), used with a warning.  ``datasets`` is imported
only here, only for real data; what was read goes into the start event (``Records.details``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

#: file extension -> datasets' packaged builder
FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text", ".text": "text"}
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


@dataclass
class Records:
    """The dataset as loaded (this rank's shard when sharded), or None for synthetic data."""

    #: a ``datasets.Dataset``, or None for synthetic data
    ds: Any
    #: one line for the ``data`` detail: ``hf:cnn_dailymail/3.0.0[train]``, ``files:... (csv)``, ``synthetic``
    source: str
    #: text column (the source of seq2seq), or the image column of image records
    column: str = ""
    #: seq2seq target column ("" = none)
    target_column: str = ""
    #: RunStarted details: data_source, data_format, data_split, data_records ...
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def synthetic(self) -> bool:
        return self.ds is None

    @property
    def images(self) -> bool:
        """Image records (an image column and a label), for image classifiers."""
        return self.ds is not None and type(self.ds.features[self.column]).__name__ == "Image"


def load(job, rank: int, world: int, log: Callable[[str, str], None], *, shard: bool = True) -> Records:
    """The job's records.  With ``shard`` (training) they are shuffled with the job's seed and
    each rank keeps its own share; without, every rank reads them all in order (prompts)."""
    data = job.data
    if data.kind == "synthetic":
        return Records(None, "synthetic")
    if data.kind == "files":
        ds, fmt = load_local(data.ref, data.split)
        rec = Records(ds, f"files:{data.ref} ({fmt})",
                      details={"data_source": f"files:{data.ref}", "data_format": fmt, "data_split": data.split})
    elif data.kind == "hf":
        rec = _hub_or_fallback(job, log)
        if rec.synthetic:
            return rec
    else:
        raise ValueError(f"unknown data kind {data.kind!r} (synthetic, files, hf)")
    _pick_columns(rec, data.column, data.target_column)
    rec.details["data_records"] = len(rec.ds)
    # shuffled once with the job's seed (the same order on every rank, like a seeded
    # DistributedSampler), then each rank keeps a contiguous 1/world of it
    if shard:
        rec.ds = rec.ds.shuffle(seed=job.seed)
        if world > 1:
            rec.ds = rec.ds.shard(num_shards=world, index=rank, contiguous=True)
    rec.details["data_rank_records"] = len(rec.ds)
    return rec


def load_local(ref: str, split: str = "train", cache_dir: str | None = None):
    """``(dataset, format)`` of a local file or folder (see module doc), loaded as ``split``."""
    datasets = _import_datasets()
    path = Path(ref).expanduser()
    if not ref or not path.exists():
        raise FileNotFoundError(f"data file or folder {ref!r} does not exist")
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")) \
        if path.is_dir() else [path]
    if path.is_dir() and files and all(p.suffix.lower() in IMAGE_EXTENSIONS for p in files):
        return datasets.load_dataset("imagefolder", data_dir=str(path), split=split, cache_dir=cache_dir), "imagefolder"
    by_format: dict[str, list[str]] = {}
    for p in files:
        fmt = FORMATS.get(p.suffix.lower())
        if fmt is None and not path.is_dir():
            raise ValueError(f"{p}: unknown data file type {p.suffix!r} (known: {', '.join(FORMATS)}, "
                             f"or a folder of images)")
        if fmt is not None:
            by_format.setdefault(fmt, []).append(str(p))
    if len(by_format) != 1:
        what = "no data files" if not by_format else f"files of several formats ({', '.join(sorted(by_format))})"
        raise ValueError(f"{ref}: {what}; a folder holds one format ({', '.join(FORMATS)}) or images")
    (fmt, paths), = by_format.items()
    kwargs = {"sample_by": "line"} if fmt == "text" else {}
    ds = datasets.load_dataset(fmt, data_files={split: paths}, split=split, cache_dir=cache_dir, **kwargs)
    if fmt == "text":  # blank lines are no records
        ds = ds.filter(lambda row: bool(row["text"].strip()))
    return ds, fmt


def load_hub(ref: str, config: str, split: str):
    """``datasets.load_dataset(ref, config, split=split)``, from the HF cache when offline."""
    return _import_datasets().load_dataset(ref, config or None, split=split)


def _import_datasets():
    try:
        import datasets
    except ImportError as exc:
        raise ImportError("the datasets package is not installed (it is in accelctl's run extra: "
                          "pip install datasets==5.2.0)") from exc
    datasets.disable_progress_bars()
    return datasets


def _hub_or_fallback(job, log: Callable[[str, str], None]) -> Records:
    data = job.data
    name = f"hf:{data.ref}" + (f"/{data.config}" if data.config else "")
    details = {"data_source": f"hf:{data.ref}", "data_format": "hub", "data_config": data.config,
               "data_split": data.split}
    try:
        return Records(load_hub(data.ref, data.config, data.split), f"{name}[{data.split}]", details=details)
    except ImportError as exc:
        why = str(exc)
    except Exception as exc:  # noqa: BLE001 - the reason is reported, then the declared fallback or a failure
        why = f"{type(exc).__name__}: {exc}{_offline_note()}"
    what = f"Hub dataset {data.ref!r} (config {data.config or '(none)'}, split {data.split!r})"
    if not data.fallback:  # the plan keeps a workload's fallback for cpu targets only
        raise RuntimeError(f"{what} could not be loaded: {why}. No fallback applies: the workload names none "
                           f"(`fallback = synthetic` or `fallback = files(\"...\")`), or the target is not the "
                           f"host CPU ({job.device.kind} runs the real data or fails)")
    synthetic = data.fallback == "synthetic"
    used = "synthetic data" if synthetic else f"local files {data.fallback!r}"
    log("warning", f"{what} could not be loaded: {why}. Using the workload's fallback instead: {used}")
    fb = {"data_fallback": data.fallback, "data_fallback_reason": why, "data_wanted": name}
    if synthetic:
        return Records(None, "synthetic (fallback)", details=fb)
    ds, fmt = load_local(data.fallback, data.split)
    return Records(ds, f"files:{data.fallback} ({fmt}, fallback)",
                   details={"data_source": f"files:{data.fallback}", "data_format": fmt, **fb})


def _offline_note() -> str:
    """Why only the cache was looked at, when the environment says so."""
    import datasets

    offline = [k for k in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE") if os.environ.get(k, "") not in ("", "0")]
    if not offline:
        return ""
    return f" [{offline[0]}={os.environ[offline[0]]}: only the local cache {datasets.config.HF_DATASETS_CACHE} is read]"


def _pick_columns(rec: Records, column: str, target: str) -> None:
    ds = rec.ds
    names = list(ds.column_names)
    for key, want in (("column", column), ("target_column", target)):
        if want and want not in names:
            raise KeyError(f"{rec.source}: no {key} {want!r} (columns: {', '.join(names)})")
    images = [c for c in names if type(ds.features[c]).__name__ == "Image"]
    if images or rec.details.get("data_format") == "imagefolder":
        if not images or "label" not in names:
            raise ValueError(f"{rec.source}: images need a label column (an image folder: class subfolders); "
                             f"columns: {', '.join(names)}")
        rec.column = rec.details["data_column"] = column or images[0]
        return
    strings = [c for c in names if getattr(ds.features[c], "dtype", "") in ("string", "large_string")]
    rec.column = column or ("text" if "text" in names else next(iter(strings), ""))
    if not rec.column:
        raise ValueError(f"{rec.source}: no text column (columns: {', '.join(names)}); name one with column = ...")
    rec.target_column = target
    rec.details["data_column"] = rec.column
    if target:
        rec.details["data_target_column"] = target


def rows(rec: Records, batch_size: int = 256) -> Iterator[dict[str, Any]]:
    """The records one by one (read from Arrow in chunks: a large split is never all in memory)."""
    for chunk in rec.ds.iter(batch_size=batch_size):
        keys = list(chunk)
        for values in zip(*(chunk[k] for k in keys)):
            yield dict(zip(keys, values))

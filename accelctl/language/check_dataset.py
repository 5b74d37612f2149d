"""The dataset block of the check pass: its source, its keys, and the Hub catalog's rules.

``dataset hf("cnn_dailymail") { config = "3.0.0"  split = "train"  column = "article" }``
is checked against ``accelctl.language.hub_datasets``: a catalogued dataset that needs a
config name and has none (E414), or a config name, split or column it does not have
(E415), is a positioned error; an uncatalogued Hub id is passed through as written.
Defaults come from the catalog too (the text column; for seq2seq the summary column).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelctl.dsl import ast
from accelctl.errors import did_you_mean
from accelctl.language import schema as S
from accelctl.language.check_common import Origins, call_kwargs, items_by_key, single_string_arg, typed_entries
from accelctl.language.hub_datasets import HubDataset, hub_dataset
from accelctl.models.catalog import objective_for
from accelctl.workload.types import DatasetSpec, ModelSpec, TaskSpec
from accelctl.language.values import Ctx
from accelctl.frozen import replace

#: keys that only mean something for a Hub dataset (not arguments of synthetic(...))
HUB_ONLY = ("config",)


def _dataset_source(call: ast.Value, ctx: Ctx, base: Path, where: str) -> tuple[str, str, dict] | None:
    if isinstance(call, ast.Word) and call.name == "synthetic":
        return "synthetic", "", {}
    if not isinstance(call, ast.Call) or call.name not in S.DATASET_SOURCES:
        name = getattr(call, "name", ast.value_text(call))
        ctx.error("E203", f"unknown dataset source '{name}' in {where}", call.span,
                  did_you_mean(str(name), S.DATASET_SOURCES))
        return None
    if call.name == "synthetic":
        table = {k: v for k, v in S.DATASET_KEYS.items() if k not in HUB_ONLY}
        return "synthetic", "", call_kwargs(call, table, ctx, "synthetic(...)")
    ref = single_string_arg(call, ctx, "dataset path" if call.name == "files" else "Hub id")
    if ref is None:
        return None
    if call.name == "files" and not (base / ref).expanduser().exists():
        ctx.error("E412", f"dataset path does not exist: {ref}", call.args[0].span,
                  f"paths are relative to the workload file's folder ({base})")
    return call.name, ref, {}


def check_dataset(it: ast.Item | None, ctx: Ctx, origins: Origins, base: Path) -> DatasetSpec:
    if it is None:
        return DatasetSpec()
    origins.add("dataset", it.span)
    header = it.header if isinstance(it, ast.Block) else it.value
    got = _dataset_source(header, ctx, base, "dataset") if header is not None else ("synthetic", "", {})
    items = items_by_key(it.items if isinstance(it, ast.Block) else (), ctx)
    vals = typed_entries(items, S.DATASET_KEYS, ctx, "dataset", origins, "dataset", extra_ok=("fallback",))
    fallback = ""
    if "fallback" in items:
        fb_item, fb = items["fallback"], None
        if not isinstance(fb_item, ast.Entry):
            ctx.error("E208", "missing '=' after 'fallback'", getattr(fb_item, "key_span", fb_item.span),
                      "write fallback = synthetic")
        elif isinstance(fb_item.value, ast.Call) and fb_item.value.name == "hf":
            ctx.error("E301", "fallback must be synthetic or files(\"path\"), not a Hub dataset", fb_item.value.span,
                      "the fallback is what runs offline: write fallback = synthetic or fallback = files(\"data/...\")")
        else:
            fb = _dataset_source(fb_item.value, ctx, base, "fallback")
        if fb is not None:
            vals = {**fb[2], **vals}
            fallback = fb[1] if fb[0] == "files" else "synthetic"
    if got is None:
        return DatasetSpec(**vals)
    kind, ref, kw = got
    if kind != "hf":
        for key in HUB_ONLY:
            if isinstance(items.get(key), ast.Entry):
                ctx.error("E414", f"'{key}' names a Hub dataset's configuration; this dataset is {kind}",
                          items[key].key_span, f"remove it, or load the data from the Hub: dataset hf(\"<id>\") "
                                               f"{{ {key} = ... }}")
                vals.pop(key, None)
    elif (known := hub_dataset(ref)) is not None:
        _check_catalogued(known, header, items, vals, ctx)
    return DatasetSpec(kind=kind, ref=ref, fallback=fallback, **{**kw, **vals})


def _check_catalogued(known: HubDataset, header: ast.Call, items: dict[str, Any], vals: dict[str, Any],
                      ctx: Ctx) -> None:
    """Config name, split and columns of a catalogued Hub dataset (E414, E415)."""
    name = known.hub_id
    configs = ", ".join(known.configs)
    config = vals.get("config", "")
    if "config" not in items and known.config_required:
        ctx.error("E414", f"{name} needs a config name (one of {configs})", header.span,
                  f'add config = "{list(known.configs)[-1]}" to the dataset block; '
                  f"datasets.load_dataset refuses {name} without one")
    elif "config" in vals and config not in known.configs:
        ctx.error("E415", f"{name} has no config '{config}' (it has {configs})", items["config"].value.span,
                  did_you_mean(config, known.configs))
        config = ""
    if "split" in vals and vals["split"] not in known.splits:
        ctx.error("E415", f"{name} has no split '{vals['split']}' (it has {', '.join(known.splits)})",
                  items["split"].value.span, did_you_mean(vals["split"], known.splits))
    columns = known.columns(config)
    for key in ("column", "target_column"):
        if key in vals and vals[key] not in columns:
            where = f"{name} ({config})" if config else name
            ctx.error("E415", f"{where} has no column '{vals[key]}' (it has {', '.join(columns)})",
                      items[key].value.span, did_you_mean(vals[key], columns))
    vals.setdefault("column", known.text_column)


def resolve_dataset(data: DatasetSpec, task: TaskSpec | None, model: ModelSpec | None, ctx: Ctx,
                    origins: Origins) -> DatasetSpec:
    """Rules across blocks: ``target_column`` is for seq2seq training (E406); a catalogued
    dataset's summary column is the seq2seq target when none is written."""
    seq2seq = task is not None and model is not None and task.training and \
        objective_for(model.family, task.objective) == "seq2seq"
    if data.target_column and not seq2seq and task is not None and model is not None:
        what = f"a {task.kind} task" if not task.training else f"{objective_for(model.family, task.objective)} training"
        ctx.error("E406", f"'target_column' does not apply to {what}", origins["dataset.target_column"],
                  "target_column names the summary column of seq2seq training (objective = seq2seq); remove it")
    known = hub_dataset(data.ref) if data.kind == "hf" else None
    if seq2seq and not data.target_column and known is not None and known.target_column:
        return replace(data, target_column=known.target_column)
    return data

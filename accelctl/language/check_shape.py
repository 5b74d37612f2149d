"""The real shape of a model named by Hub id or path, for the check pass (``check_model``).

A catalogued model has its shape in ``accelctl.models.catalog.KNOWN_MODELS``.  Any other gets
it, in order, from ``shape = <family>(...)`` written in the model block, or from its own
config.json (``accelctl.models.hf_config``: ``config = "path"``, the local folder, the HF
cache, the Hub when the model block says ``hub = online``).  Where none gives it, every
accelerator target is refused at the model line (E425): its memory, estimate and cost would
be the stand-in's.  A config.json the workload names that cannot be used is E426, as is any
config.json read that is broken (not a regular file, not JSON, a size missing, out of range or
at odds with another); one found in the HF cache or a local model's folder that could not be
fetched, or whose model_type has no formulas and cannot be read from transformers' own class
either, is W426.  A model_type without formulas that transformers has a class for is the
``transformers`` family, its shape the facts of that class (``accelctl.models.module_family``:
a subprocess, cached).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelctl.dsl import ast
from accelctl.models import hf_config, module_family
from accelctl.catalog import DEVICES
from accelctl.models.catalog import real_architecture
from accelctl.workload.types import ModelSpec, TargetSpec
from accelctl.language.values import Ctx


def written_shape(items: dict[str, Any], ctx: Ctx, check_shape) -> tuple[str, dict[str, Any]] | None:
    """``shape = llama(layers = 32, ...)``: the family and the sizes written, the rest at the
    real models' usual values (never the stand-in's tiny defaults)."""
    it = items.get("shape")
    if it is None:
        return None
    if not (isinstance(it, ast.Entry) and isinstance(it.value, ast.Call)):
        ctx.error("E301", "shape must be an architecture like llama(layers = 32, hidden = 4096, heads = 32)",
                  it.span)
        return None
    got = check_shape(it.value, ctx, "shape")
    if got is None:
        return None
    written = {k.name: got[1][k.name] for k in it.value.kwargs if k.name in got[1]}
    return got[0], real_architecture(got[0], written)


def misplaced(items: dict[str, Any], header, ctx: Ctx) -> None:
    """``shape``, ``config`` and ``hub`` name where a Hub or local model's shape comes from;
    an architecture model's shape is its own arguments (E202, not silently ignored)."""
    for key in ("shape", "config", "hub"):
        if key in items:
            it = items[key]
            ctx.error("E202", f"'{key}' applies to hf(...) and local(...) models; {header.name}(...) is an "
                              "architecture", getattr(it, "key_span", it.span),
                      f"write its sizes as {header.name}(layers = .., hidden = ..), or remove {key}")


def from_config(source: str, ref: str, opts: dict[str, Any], items: dict[str, Any], ctx: Ctx, base: Path,
                span) -> tuple[str, dict[str, Any]] | None:
    """(family, shape) read from config.json, or None where none is found or usable."""
    written = opts.get("config", "")
    where = items["config"].span if "config" in items else span
    try:
        path = hf_config.find(ref, source, base, written, online=opts.get("hub") == "online")
        if path is None:
            return None
        try:
            return hf_config.load(path)
        except hf_config.UnknownModelType:
            return module_family.load(path)  # a model_type without formulas: its class's facts
    except hf_config.ConfigError as exc:
        # a config the workload names, or any that was read and is broken, is an error; one
        # found or fetched on its own that could not be had, or whose model_type has no
        # formulas, leaves the shape unknown (E425 for accelerator targets), said here
        fetched = isinstance(exc, hf_config.FetchFailed)
        if not written and (fetched or isinstance(exc, hf_config.UnknownModelType)):
            ctx.warn("W426", f"hub = online, but config.json of {ref} could not be fetched: its shape is unknown"
                     if fetched else f"the config.json found for {ref} cannot be used: its shape is unknown",
                     where, f"{exc}; put config.json beside the workload (config = \"path\") or in the HF cache, "
                            "or write shape = <family>(...)")
        else:
            ctx.error("E426", str(exc), where, getattr(exc, "hint", "") or "fix the file, point config at the "
                      "model's config.json, or write shape = <family>(...) instead")
        return None


def refuse_unshaped(model: ModelSpec | None, targets: tuple[TargetSpec, ...], model_item, ctx: Ctx) -> None:
    """E425 on every accelerator target of a Hub or local model whose real shape is unknown."""
    if model is None or model.source == "arch" or model.real_shape:
        return
    header = model_item.header if isinstance(model_item, ast.Block) else getattr(model_item, "value", None)
    span = getattr(header, "span", None) or model_item.span
    for t in targets:
        if t.device in DEVICES and not DEVICES[t.device].host:
            ctx.error("E425", f"the real shape of {model.ref} is unknown (no shape written, no config.json found): target {t.name} ({t.device}) "
                              f"would be planned, estimated and priced as the {model.family} stand-in", span,
                      f"write shape = {model.family}(layers = .., hidden = .., heads = .., ...) in the model block, "
                      "config = \"path/to/config.json\", or hub = online to fetch its config.json")

"""Transformer Engine in the worker: the timm block swap (seed 002), the llama-class linear swap,
and the FP8 forward context.

Everything TE-specific comes from the plan's ``te_recipe.json`` (path in ``ACCELCTL_TE_CONFIG``):
layer settings, FP8 on or off, the targeted version's autocast function and recipe.
``transformer_engine`` is imported only inside the functions; ``accelctl.backends.te_fp8.check``
reads this file with ``ast`` and checks every ``te.X(...)`` call against TE's source.
Use: ``load()`` (None unless a te_fp8 plan), ``block_fn(cfg)`` for timm's ``VisionTransformer``,
``swap_linears(model, cfg, log)``, ``forward_context(cfg)`` inside bf16 autocast (docs/internals/estimate-backends-worker.md).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Callable, ContextManager

from accelctl.contract import envnames

#: set by the te_fp8 plan to ``{run_dir}/te_recipe.json``
CONFIG_ENV = envnames.TE_CONFIG


def load(path: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The plan's TE settings (``te_recipe.json``), or None when the plan has none."""
    path = path or os.environ.get(CONFIG_ENV)
    if not path:
        return None
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _te():
    try:
        import transformer_engine.pytorch as te
    except ImportError as exc:  # (TE's empty meta package raises its own RuntimeError, saying how to install)
        raise RuntimeError("this plan uses Transformer Engine layers (backend te_fp8): transformer_engine.pytorch "
                           "is not importable here; install transformer-engine[pytorch] on a CUDA machine") from exc
    return te


def block_fn(cfg: dict[str, Any]) -> type:
    """A timm ``block_fn``: ``te.TransformerLayer`` behind timm's Block signature.

    The TE layer brings its own LayerNorm, GELU MLP and attention, so timm's layer classes are not
    used; options TE has no equivalent for are refused, not ignored.
    """
    te = _te()
    layer_kwargs = dict(cfg["layer"]["kwargs"])  # mask type, tensor layout, LayerNorm eps

    class TEBlock(te.TransformerLayer):
        def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                     qk_norm: bool = False, proj_drop: float = 0.0, attn_drop: float = 0.0, init_values=None,
                     drop_path: float = 0.0, device=None, dtype=None, **_timm_layer_classes):
            if qk_norm or init_values:
                raise ValueError("te_fp8: timm's qk_norm / init_values (LayerScale) have no te.TransformerLayer "
                                 "equivalent here; build the ViT without them")
            super().__init__(
                hidden_size=dim,
                ffn_hidden_size=int(dim * mlp_ratio),
                num_attention_heads=num_heads,
                hidden_dropout=proj_drop,
                attention_dropout=attn_drop,
                drop_path_rate=drop_path,
                bias=qkv_bias,
                params_dtype=dtype,
                device=device if device is not None else "cuda",
                **layer_kwargs,
            )

    TEBlock.__name__ = TEBlock.__qualname__ = "TEBlock"
    return TEBlock


def module_names(model, patterns: list[str]) -> list[str]:
    """The modules of ``model`` named by ``patterns`` (``*`` = a layer index)."""
    import re

    wanted = [re.compile("^" + re.escape(p).replace(r"\*", r"\d+") + "$") for p in patterns]
    return [name for name, _ in model.named_modules() if any(w.match(name) for w in wanted)]


def swap_linears(model, cfg: dict[str, Any], log: Callable[[str, str], None]):
    """A llama-class model with the linears the plan names (``layer.modules``: q/k/v/o and
    gate/up/down) as ``te.Linear`` of the same shape and weights, in place; attention (rotary,
    grouped-query, SDPA), RMSNorm and the LM head stay transformers'."""
    import torch

    te = _te()
    names = module_names(model, cfg["layer"]["modules"])
    if not names:
        raise RuntimeError(f"te_fp8: no module of this model matches {cfg['layer']['modules']}")
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        old = getattr(parent, child)
        new = te.Linear(old.in_features, old.out_features, bias=old.bias is not None, params_dtype=old.weight.dtype,
                        device="cuda")  # TE's layers live on the GPU; copy_ below moves the weights there
        with torch.no_grad():
            new.weight.copy_(old.weight)
            if old.bias is not None:
                new.bias.copy_(old.bias)
        setattr(parent, child, new)
    log("info", f"Transformer Engine: {len(names)} linear layer(s) as te.Linear ({', '.join(cfg['layer']['modules'])})")
    return model


def recipe(cfg: dict[str, Any]):
    """The FP8 recipe object of ``cfg`` (``DelayedScaling(fp8_format=Format.X, ...)``)."""
    from transformer_engine.common import recipe as te_recipe

    kwargs = dict(cfg["recipe"]["kwargs"])
    kwargs["fp8_format"] = te_recipe.Format[kwargs["fp8_format"]]
    return getattr(te_recipe, cfg["recipe"]["class"])(**kwargs)


def forward_context(cfg: dict[str, Any] | None) -> Callable[[], ContextManager]:
    """A factory of the context entered around each forward, inside bf16 autocast: with FP8 the
    targeted TE version's autocast (``te.autocast`` from 2.9, ``te.fp8_autocast`` before) with one
    recipe object for the whole run (the layers' amax history is keyed to it); without, a no-op.
    """
    if cfg is None or not cfg.get("fp8"):
        return contextlib.nullcontext
    te = _te()
    api = cfg["autocast"]
    function = getattr(te, api["function"])
    kwargs = {**api["kwargs"], api["recipe_keyword"]: recipe(cfg)}
    return lambda: function(**kwargs)

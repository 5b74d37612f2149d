"""Gaudi extras for the worker's hpu device adapter: what optimum-habana's GaudiTrainer and
examples/text-generation do on an HPU, as small functions the loops can call.

Every Habana import is inside a function, so importing this module needs nothing from
Habana; the names are those of SynapseAI's PyTorch bridge (``habana_frameworks.torch``)
as optimum-habana uses them (file references are to huggingface/optimum-habana):

* ``habana_frameworks.torch.core.mark_step()`` cuts the lazily recorded graph and runs it.
  GaudiTrainer calls it after ``backward()`` and again after ``optimizer.step()``
  (optimum/habana/transformers/trainer.py, training loop, ``if args.use_lazy_mode``).
* ``habana_frameworks.torch.hpu.wrap_in_hpu_graph(model, disable_tensor_cache=...,
  max_graphs=...)`` records the forward once and replays it (inference;
  examples/text-generation/utils.py ``setup_model``, trainer.py evaluation loop).
* ``habana_frameworks.torch.hpu.ModuleCacher()(model=model, inplace=True)``: HPU graphs
  for training (trainer.py ``_wrap_model`` with ``use_hpu_graphs_for_training``).
* ``habana_frameworks.torch.hpex.optimizers.FusedAdamW`` and
  ``habana_frameworks.torch.hpex.normalization.FusedClipNorm(params, max_norm).clip_norm(params)``:
  the fused kernels GaudiConfig's ``use_fused_adam`` / ``use_fused_clip_norm`` select.
* ``habana_frameworks.torch.hpex.experimental.transformer_engine``: Gaudi's Transformer
  Engine (``te.fp8_autocast(enabled=True, fp8_recipe=te.recipe.DelayedScaling(...))``;
  optimum/habana/accelerate/utils/transformer_engine.py).

None of this can run without a Gaudi; the plan-side checks are in
``accelctl.backends.gaudi.check``.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Iterable

from accelctl.contract import envnames

#: set by the gaudi backend's plan: the generated gaudi_config.json
GAUDI_CONFIG_ENV = envnames.GAUDI_CONFIG


def gaudi_config(path: str | None = None) -> dict[str, Any]:
    """The plan's GaudiConfig (``use_torch_autocast``, ``use_fused_adam``, ``use_fused_clip_norm``);
    empty when the plan wrote none."""
    path = path or os.environ.get(GAUDI_CONFIG_ENV, "")
    if not path or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def lazy_mode() -> bool:
    """Whether the bridge runs lazily: ``PT_HPU_LAZY_MODE`` (read by the bridge at import, so
    the plan sets it in the environment; lazy is the default)."""
    return os.environ.get("PT_HPU_LAZY_MODE", "1") != "0"


def mark_step() -> None:
    """Execute the graph recorded so far (lazy mode only; a no-op in eager mode)."""
    if lazy_mode():
        import habana_frameworks.torch.core as htcore

        htcore.mark_step()


# ------------------------------------------------------------------ inference
def wrap_for_generation(model, hpu_graphs: bool, max_graphs: int | None = None,
                        disable_tensor_cache: bool = False):
    """HPU graphs around a generation model (``--use_hpu_graphs`` of run_generation.py).

    Call after ``model.eval().to("hpu")`` and before the first ``generate``: the first calls
    record the graphs (the compile cost the warm-up steps absorb), later ones replay them.
    """
    if not hpu_graphs:
        return model
    from habana_frameworks.torch.hpu import wrap_in_hpu_graph

    return wrap_in_hpu_graph(model, disable_tensor_cache=disable_tensor_cache, max_graphs=max_graphs)


# ------------------------------------------------------------------ training
def wrap_for_training(model, hpu_graphs: bool):
    """HPU graphs for training steps (GaudiTrainer's ``use_hpu_graphs_for_training``): the
    module caches its forward/backward graphs in place."""
    if hpu_graphs:
        import habana_frameworks.torch as ht

        ht.hpu.ModuleCacher()(model=model, inplace=True)
    return model


def fused_adamw(params: Iterable, lr: float, weight_decay: float = 0.0, betas=(0.9, 0.999), eps: float = 1e-8,
                config: dict[str, Any] | None = None):
    """Habana's FusedAdamW when the GaudiConfig asks for it, else None (the loop keeps its own)."""
    config = gaudi_config() if config is None else config
    if not config.get("use_fused_adam"):
        return None
    from habana_frameworks.torch.hpex.optimizers import FusedAdamW

    return FusedAdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


class GradClipper:
    """Clip the gradient norm with Habana's FusedClipNorm when the GaudiConfig asks for it."""

    def __init__(self, params: Iterable, max_norm: float, config: dict[str, Any] | None = None) -> None:
        self.params = list(params)
        self.max_norm = max_norm
        config = gaudi_config() if config is None else config
        self.fused = None
        if max_norm > 0 and config.get("use_fused_clip_norm"):
            from habana_frameworks.torch.hpex.normalization import FusedClipNorm

            self.fused = FusedClipNorm(self.params, max_norm)

    def __call__(self):
        if self.max_norm <= 0:
            return None
        if self.fused is not None:
            return self.fused.clip_norm(self.params)
        import torch

        return torch.nn.utils.clip_grad_norm_(self.params, self.max_norm)


def train_step(loss, optimizer, clip: GradClipper | None = None) -> None:
    """One optimizer step in lazy mode, with mark_step where GaudiTrainer puts it.

    1. ``loss.backward()`` records the backward graph;
    2. ``mark_step()`` runs forward + backward, so the gradients exist before clipping;
    3. clip, ``optimizer.step()``;
    4. ``mark_step()`` runs the update (without it, the next forward would be appended to
       this step's graph and the measured step time would drift into the next one).
    """
    loss.backward()
    mark_step()
    if clip is not None:
        clip()
    optimizer.step()
    mark_step()


def fp8_autocast(recipe: dict[str, Any]):
    """Gaudi2/3 FP8 through Habana's Transformer Engine, with the workload's DelayedScaling
    recipe (format hybrid/e4m3, amax_history, amax_algo, margin)."""
    if not recipe:
        return contextlib.nullcontext()
    import habana_frameworks.torch.hpex.experimental.transformer_engine as te

    fmt = {"hybrid": "HYBRID", "e4m3": "E4M3"}[recipe.get("format", "hybrid")]
    r = te.recipe.DelayedScaling(fp8_format=getattr(te.recipe.Format, fmt), margin=recipe.get("margin", 0),
                                 amax_history_len=recipe.get("amax_history", 1024),
                                 amax_compute_algo=recipe.get("amax_algo", "max"))
    return te.fp8_autocast(enabled=True, fp8_recipe=r)

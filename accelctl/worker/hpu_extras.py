"""What optimum-habana's GaudiTrainer does on an HPU beyond the loop, for the worker's hpu adapter.

The plan's GaudiConfig (``ACCELCTL_GAUDI_CONFIG``) selects the fused kernels (``FusedAdamW``,
``FusedClipNorm``), and ``ModuleCacher`` gives HPU graphs for training, with the names SynapseAI's
``habana_frameworks.torch`` has as optimum-habana's trainer.py uses them.  Every Habana import is
inside a function; lazy mode and inference graphs are ``devices.HpuAdapter``'s.  None of this runs
without a Gaudi; the plan-side checks are ``accelctl.backends.gaudi.check``'s.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable

from accelctl.contract import envnames


def gaudi_config(path: str | None = None) -> dict[str, Any]:
    """The plan's GaudiConfig (``use_torch_autocast``, ``use_fused_adam``, ``use_fused_clip_norm``);
    empty when the plan wrote none."""
    path = path or os.environ.get(envnames.GAUDI_CONFIG, "")
    if not path or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def fused_adamw(params: Iterable, opt, config: dict[str, Any]):
    """Habana's FusedAdamW for an ``adamw`` optimizer when the GaudiConfig asks for it, else None."""
    if opt.name != "adamw" or not config.get("use_fused_adam"):
        return None
    from habana_frameworks.torch.hpex.optimizers import FusedAdamW

    return FusedAdamW(params, lr=opt.lr, weight_decay=opt.weight_decay)


def fused_clip(params: Iterable, max_norm: float, config: dict[str, Any]) -> Callable[[], Any] | None:
    """A ``clip()`` through Habana's FusedClipNorm when the GaudiConfig asks for it, else None."""
    if max_norm <= 0 or not config.get("use_fused_clip_norm"):
        return None
    from habana_frameworks.torch.hpex.normalization import FusedClipNorm

    params = list(params)
    fused = FusedClipNorm(params, max_norm)
    return lambda: fused.clip_norm(params)


def cache_training_graphs(model):
    """HPU graphs for training steps (GaudiTrainer's ``use_hpu_graphs_for_training``): the
    module caches its forward/backward graphs in place."""
    import habana_frameworks.torch as ht

    ht.hpu.ModuleCacher()(model=model, inplace=True)
    return model

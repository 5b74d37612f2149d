"""A tiny real CPU workload (a one-layer ViT on synthetic images) for the trackers' tests."""

from __future__ import annotations

from pathlib import Path

TEMPLATE = """\
workload {name} {{
  task pretrain {{ objective = classification }}
  model vit(layers = 1, hidden = 32, heads = 2, image_size = 16, patch = 8, classes = 10)
  dataset synthetic(image_size = 16, channels = 3, classes = 10)
  optimizer {optimizer}
  precision fp32
  {extra}
  batch {{ micro = 4 }}
  measure {{ warmup = 1 step  steps = {steps} steps }}
  target cpu {{ devices = 1  threads = 1 }}
}}
"""


def write_workload(folder: Path, name: str, *, optimizer: str = "sgd(lr = 0.01)", steps: int = 5,
                   extra: str = "") -> Path:
    """``<folder>/<name>.wl``, the tiny workload named ``name``."""
    path = folder / f"{name}.wl"
    path.write_text(TEMPLATE.format(name=name, optimizer=optimizer, steps=steps, extra=extra), encoding="utf-8")
    return path

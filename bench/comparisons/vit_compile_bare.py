"""ViT-Tiny/16 224 px training step, batch 2, both compiled: ``accelctl run`` with
``optimize { compile = on }`` vs the bare timm loop with ``model.compile()``: what accelctl's
own loop costs around the same compiled model."""

from bench.comparisons._train import train_setup
from bench.comparisons.vit_step import ARCH, SHAPE
from bench.harness import Comparison

COMPARISON = Comparison(
    name="vit_compile_bare", title="ViT-Tiny/16 step, both compiled: accelctl vs bare timm loop + model.compile()",
    setup=lambda quick, workdir: train_setup(quick, workdir, "vit_tiny_compiled.wl", "timm_vit.py",
                                             [*SHAPE, "--compile"],
                                             "bare timm loop with model.compile() (bench/baselines/timm_vit.py)",
                                             ARCH, min_warmup=3),
    pairs=4, quick_pairs=2)

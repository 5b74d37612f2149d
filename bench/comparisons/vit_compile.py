"""ViT-Tiny/16 224 px training step, batch 2: ``accelctl run`` with ``optimize { compile = on }``
vs the bare eager timm loop (issue 12's goal: the compiled step >= 1.1x faster, i.e. a step_s
ratio <= 0.91).  The compiled arm's wall includes its compilation (warm-up)."""

from bench.comparisons._train import train_setup
from bench.comparisons.vit_step import ARCH, SHAPE
from bench.harness import Comparison

COMPARISON = Comparison(
    name="vit_compile", title="ViT-Tiny/16 step, accelctl compile = on vs bare eager timm loop",
    setup=lambda quick, workdir: train_setup(quick, workdir, "vit_tiny_compiled.wl", "timm_vit.py", SHAPE,
                                             "bare eager timm loop (bench/baselines/timm_vit.py)", ARCH,
                                             min_warmup=3),
    pairs=4, quick_pairs=2)

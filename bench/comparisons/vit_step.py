"""ViT-Tiny/16 224 px training step, batch 2: ``accelctl run`` vs a bare timm loop."""

from bench.comparisons._train import train_setup
from bench.harness import Comparison

SHAPE = ["--layers", "12", "--hidden", "192", "--heads", "3", "--image-size", "224", "--patch", "16",
         "--classes", "1000", "--batch", "2"]
ARCH = {"layers": 12, "hidden": 192, "heads": 3, "image_size": 224, "patch": 16, "classes": 1000, "mlp_ratio": 4.0}

COMPARISON = Comparison(
    name="vit_step", title="ViT-Tiny/16 224 px step, batch 2 vs bare timm loop",
    setup=lambda quick, workdir: train_setup(quick, workdir, "vit_tiny.wl", "timm_vit.py", SHAPE,
                                             "bare timm loop (bench/baselines/timm_vit.py)", ARCH),
    pairs=6, quick_pairs=2)

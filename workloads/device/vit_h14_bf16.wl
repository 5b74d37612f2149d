# Device check (issue 21, docs/device-runs.md): seed 002's ViT-Huge step on ONE H100.
#
# Seed 002: timm VisionTransformer, ViT-Huge shape, random 3x224x224 images, 1000 classes,
# SGD lr 0.001 momentum 0.9, bf16 autocast, batch 64 per GPU; 0.199 s per step on
# 8 x H100 with DDP (p5.48xlarge).  One GPU has no gradient all-reduce, so its step should
# be at or below that.  ViT-H/14 is the catalog's timm/vit_huge_patch14_224 (632 M
# parameters), built with random weights (the device machine reaches no network).
# python -m bench.device runs the target of the GPU it finds (h100 or h200); --dry rehearses it on this CPU.

workload vit_h14_bf16 {
  description = "ViT-H/14 (timm) bf16 training step, micro-batch 64, one H100 (seed 002)"
  task pretrain { objective = classification }
  model hf("timm/vit_huge_patch14_224") {
    weights  = random
    stand_in = vit(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(image_size = 224, channels = 3, classes = 1000)
  optimizer sgd(lr = 0.001, momentum = 0.9)
  precision bf16
  batch { micro = 64 }
  measure { warmup = 3 steps  steps = 12 steps }

  target h100 { device = h100  devices = 1 }
  target h200 { device = h200  devices = 1 }
}

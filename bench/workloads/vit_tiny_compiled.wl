# bench: ViT-Tiny/16 at 224 px, batch 2, fp32, one thread, torch.compile'd (optimize { compile = on }):
# bench/workloads/vit_tiny.wl plus the optimize block.  Faced by bench/baselines/timm_vit.py with
# the same shape, eager (comparison vit_compile) and with --compile (vit_compile_bare).
workload bench_vit_tiny_compiled {
  description = "ViT-Tiny/16 224 px classification, compiled, random weights, synthetic images (python -m bench)"
  seed = 0
  task pretrain { objective = classification }
  model vit(layers = 12, hidden = 192, heads = 3, mlp_ratio = 4.0, image_size = 224, patch = 16, classes = 1000)
  dataset synthetic(image_size = 224, channels = 3, classes = 1000)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 2 }
  measure { warmup = 3 steps  steps = 20 steps }
  optimize { compile = on }                  # torch.compile (inductor), compiled in warm-up
  target cpu { devices = 1  threads = 1 }
}

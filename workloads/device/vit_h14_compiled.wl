# Device check (issue 21): the ViT-H/14 step of vit_h14_bf16.wl with optimize { compile = on }
# (torch.compile, inductor): compile time reported apart (compile_s), the measured steps
# against vit_h14_bf16's eager ones.

workload vit_h14_compiled {
  description = "ViT-H/14 (timm) bf16 training step, torch.compile, micro-batch 64, one H100"
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
  optimize { compile = on }

  target h100 { device = h100  devices = 1 }
  target h200 { device = h200  devices = 1 }
}

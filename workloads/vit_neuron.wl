# Training a ViT on AWS Trainium (trn1) vs Inferentia2 (inf2) with torch-xla / Neuron
# (seed 004: "Training on AWS Inferentia2").
#
# Toy model: timm VisionTransformer() with its default shape (ViT-Base: embed 768,
# depth 12, heads 12, patch 16, 224 x 224, 1000 classes), random images, batch 16,
# Adam (PyTorch defaults, lr 0.001), XLA_USE_BF16=1, process group 'xla',
# MpDeviceLoader, xm.optimizer_step, launched with torchrun --nproc_per_node=<cores>.
# Data-loader workers follow the vCPU count: 4 on trn1, 2 on inf2.xlarge, 8 on the
# large inf2 types.  The average step time skips the first 10 steps and stops after 500.
# Compilation is excluded from the timing (it can take >10 min for this toy model;
# neuron_parallel_compile and offline compilation reduce it).
#
# Results (seed 004): Trainium is faster in absolute terms; Inferentia gives ~39%
# better price-performance on the 2-core instance types and more on the larger ones.
# Devices are counted in NeuronCores (2 per chip).  Prices: AWS on-demand us-east-1
# (instance catalog).  The seed's "inf2.12xlarge" is not an instance type; the
# 12-core inf2 type is inf2.24xlarge.

workload vit_neuron {
  description = "ViT (timm default shape) training step time on trn1 vs inf2 (seed 004)"
  task pretrain { objective = classification }
  model vit(layers = 12, hidden = 768, heads = 12, image_size = 224, patch = 16, classes = 1000) {
    stand_in = vit(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(image_size = 224, channels = 3, classes = 1000)
  optimizer adam(lr = 0.001)
  precision bf16                       # XLA_USE_BF16=1
  batch { micro = 16 }
  measure { warmup = 10 steps  steps = 490 steps }          # skip 10, stop after 500

  target trn1_2xlarge {                # 2 NeuronCores, 8 vCPU
    instance           = trn1.2xlarge
    parallel           = ddp
    dataloader_workers = 4
  }
  target trn1_32xlarge {               # 32 NeuronCores, 128 vCPU
    instance           = trn1.32xlarge
    parallel           = ddp
    dataloader_workers = 4
  }
  target inf2_xlarge {                 # 2 NeuronCores, 4 vCPU: ~39% better price-performance than trn1.2xlarge
    instance           = inf2.xlarge
    parallel           = ddp
    dataloader_workers = 2
  }
  target inf2_24xlarge {               # 12 NeuronCores, 96 vCPU
    instance           = inf2.24xlarge
    parallel           = ddp
    dataloader_workers = 8
  }
  target inf2_48xlarge {               # 24 NeuronCores, 192 vCPU
    instance           = inf2.48xlarge
    parallel           = ddp
    dataloader_workers = 8
  }
  target cpu {
    devices            = 1
    precision          = fp32
    threads            = 1
    dataloader_workers = 0
    measure { warmup = 2 steps  steps = 20 steps }   # the seed's 10 + 490 are for Neuron
  }
}

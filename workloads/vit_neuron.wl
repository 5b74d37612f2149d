# Training a ViT on AWS Trainium (trn1) vs Inferentia2 (inf2) with torch-xla / Neuron
# (seed 004: "Training on AWS Inferentia2").  Each fact cites its seed line
# (shared/seeds/004_d2bc0e5ef521a59f.txt, "004:N"); tests/language/seed_facts.txt keeps them,
# tests/language/test_seed_workloads.py checks this file against them.
#
# Toy model (004:25, 004:29): timm 0.9.5 VisionTransformer() with its default shape
# (ViT-Base: embed 768, depth 12, heads 12, patch 16, 224 x 224, 1000 classes), random
# initial weights (torch.manual_seed(0) on every worker), random 3 x 224 x 224 images
# (torch.randn), labels index % 1000, batch 16 per NeuronCore, torch.optim.Adam with
# PyTorch's defaults (lr 0.001), XLA_USE_BF16=1, process group 'xla', MpDeviceLoader,
# xm.optimizer_step, launched with torchrun --nproc_per_node=<cores>.  Data-loader workers
# follow the vCPU count (004:29): 4 on trn1, 2 on inf2.xlarge, 8 on "inf2.12xlarge" and
# inf2.48xlarge.
# Timing (004:29): enumerate(data_loader, start=1), each step timed from its own start,
# summed "if idx > 10", stopping after "idx > 500": steps 1-10 skipped (10) and steps
# 11-501 counted (491).  The printed code tests an `idx` it never defines (a NameError
# as written): read here as the step counter, the only reading that runs.
# Compilation is excluded from the timing (004:41; it can take >10 min for this toy
# model; neuron_parallel_compile and offline compilation reduce it).
# Software (004:20): "Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720":
# each Neuron target's stack names that AMI and pins timm 0.9.5 (004:25).  bf16 is the seed's
# XLA_USE_BF16=1 (004:29: os.environ['XLA_USE_BF16'] = '1' in __main__): xla_use_bf16 = on in
# each Neuron target (the plan sets it and says that torch-xla 2.9 deprecates it).
#
# Results (004:37): Trainium is faster in absolute terms; Inferentia gives ~39% better
# price-performance on the 2-core instance types and more on the larger ones.  The
# table is an image: no raw figures.  Trn1 has two instance types and Inf2 four
# (004:13): every one is a target below.  Devices are counted in NeuronCores (2 per
# chip).  Prices: AWS on-demand us-east-1 (instance catalog).  The seed's
# "inf2.12xlarge" is not an instance type; the 12-core inf2 type is inf2.24xlarge.
# inf2.8xlarge (2 cores, 32 vCPUs) is not in the seed's worker rule: 8 workers here, as
# for the other inf2 types with 32 vCPUs or more (only the 4-vCPU xlarge gets 2).

workload vit_neuron {
  description = "ViT (timm default shape) training step time on trn1 vs inf2 (seed 004)"
  task pretrain { objective = classification }
  model vit(layers = 12, hidden = 768, heads = 12, image_size = 224, patch = 16, classes = 1000) {
    stand_in = vit(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(image_size = 224, channels = 3, classes = 1000)
  optimizer adam(lr = 0.001)           # 004:29: torch.optim.Adam(model.parameters()), PyTorch's defaults
  precision bf16                       # 004:29: XLA_USE_BF16=1 (xla_use_bf16 = on below)
  batch { micro = 16 }                 # 004:29: train(batch_size=16), per process (NeuronCore)
  measure { warmup = 10 steps  steps = 491 steps }          # 004:29: steps 1-10 skipped, 11-501 counted

  target trn1_2xlarge {                # 2 NeuronCores, 8 vCPU
    instance           = trn1.2xlarge
    parallel           = ddp
    dataloader_workers = 4
    xla_use_bf16       = on             # 004:29: os.environ['XLA_USE_BF16'] = '1'
    stack { ami = "Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720"  packages { timm = "0.9.5" } }   # 004:20, 004:25
  }
  target trn1_32xlarge {               # 32 NeuronCores, 128 vCPU
    instance           = trn1.32xlarge
    parallel           = ddp
    dataloader_workers = 4
    xla_use_bf16       = on             # 004:29: os.environ['XLA_USE_BF16'] = '1'
    stack { ami = "Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720"  packages { timm = "0.9.5" } }   # 004:20, 004:25
  }
  target inf2_xlarge {                 # 2 NeuronCores, 4 vCPU: ~39% better price-performance than trn1.2xlarge
    instance           = inf2.xlarge
    parallel           = ddp
    dataloader_workers = 2
    xla_use_bf16       = on             # 004:29: os.environ['XLA_USE_BF16'] = '1'
    stack { ami = "Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720"  packages { timm = "0.9.5" } }   # 004:20, 004:25
  }
  target inf2_8xlarge {                # 2 NeuronCores, 32 vCPU
    instance           = inf2.8xlarge
    parallel           = ddp
    dataloader_workers = 8
    xla_use_bf16       = on             # 004:29: os.environ['XLA_USE_BF16'] = '1'
    stack { ami = "Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720"  packages { timm = "0.9.5" } }   # 004:20, 004:25
  }
  target inf2_24xlarge {               # 12 NeuronCores, 96 vCPU
    instance           = inf2.24xlarge
    parallel           = ddp
    dataloader_workers = 8
    xla_use_bf16       = on             # 004:29: os.environ['XLA_USE_BF16'] = '1'
    stack { ami = "Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720"  packages { timm = "0.9.5" } }   # 004:20, 004:25
  }
  target inf2_48xlarge {               # 24 NeuronCores, 192 vCPU
    instance           = inf2.48xlarge
    parallel           = ddp
    dataloader_workers = 8
    xla_use_bf16       = on             # 004:29: os.environ['XLA_USE_BF16'] = '1'
    stack { ami = "Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720"  packages { timm = "0.9.5" } }   # 004:20, 004:25
  }
  target cpu {
    devices            = 1
    precision          = fp32
    threads            = 1
    dataloader_workers = 0
    measure { warmup = 2 steps  steps = 20 steps }   # the seed's 10 + 491 are for Neuron
  }
}

# BERT-Large pre-training, phase 1, on Gaudi1, Gaudi2 and A100 80GB (seed 000:
# "Faster training and inference: Habana Gaudi2 vs NVIDIA A100 80GB", Optimum Habana).
#
# 8 devices, data parallel, mixed precision: bf16/fp32 on Gaudi, fp16 on A100.
# Phase 1 uses sequences of 128 tokens.  Figures of seed 000:
#   per-device batch 32 (global 256), 65,000 steps:
#     Gaudi1 8 h 53 min, Gaudi2 2 h 55 min (x3.04); Gaudi2 1580.2 samples/s
#   per-device batch 64 (global 512), 20,000 steps reach the same loss:
#     Gaudi2 1 h 33 min, 1835.8 samples/s (x1.16 throughput over bs 32);
#     overall x5.75 less time and x3.53 throughput vs Gaudi1 at bs 32
# The seed gives no A100 time for this benchmark; the A100 targets are there to compare.
# The two batch sizes are two workloads because the step count of the real job
# (train_steps, used for the projected time and cost) differs.
#
# The seed names neither the corpus nor the optimizer and its learning rate, so none is
# written here (the default optimizer, adamw at lr 0.001, is used; throughput does not
# depend on it).  Phase 1 of the BERT recipes trains on Wikipedia + BookCorpus at
# 128 tokens: synthetic token batches of that shape here.

workload bert_large_phase1_bs32 {
  description = "BERT-Large phase 1, per-device batch 32, global 256, 65,000 steps (seed 000)"
  task pretrain {
    objective   = mlm
    train_steps = 65000 steps
  }
  model hf("bert-large-uncased") {
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128 tokens, mlm_probability = 0.15)
  precision bf16
  batch { micro = 32  accumulation = 1  global = 256 }      # 32 x 1 x 8 = 256
  measure { warmup = 5 steps  steps = 20 steps }

  target gaudi1 {                      # 8 h 53 min for 65,000 steps
    instance = dl1.24xlarge            # 8 x Gaudi1 32 GB, 13.11 usd/h
    devices  = 8
    parallel = ddp
  }
  target gaudi2 {                      # 2 h 55 min, 1580.2 samples/s
    device   = gaudi2
    instance = gaudi2-hls
    devices  = 8
    parallel = ddp
  }
  target a100 {                        # A100 80GB, fp16 mixed precision
    device    = a100
    devices   = 8
    parallel  = ddp
    precision = fp16
  }
  target cpu {
    devices   = 1
    precision = fp32
    threads   = 1
    batch { micro = 4  global = 4 }
  }
}

workload bert_large_phase1_bs64 {
  description = "BERT-Large phase 1, per-device batch 64, global 512, 20,000 steps (seed 000)"
  task pretrain {
    objective   = mlm
    train_steps = 20000 steps
  }
  model hf("bert-large-uncased") {
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128 tokens, mlm_probability = 0.15)
  precision bf16
  batch { micro = 64  accumulation = 1  global = 512 }      # 64 x 1 x 8 = 512
  measure { warmup = 5 steps  steps = 20 steps }

  target gaudi1 {                      # the seed's Gaudi1 figure is at bs 32 (bs 64 is Gaudi2's 96 GB)
    instance = dl1.24xlarge
    devices  = 8
    parallel = ddp
  }
  target gaudi2 {                      # 1 h 33 min, 1835.8 samples/s
    device   = gaudi2
    instance = gaudi2-hls
    devices  = 8
    parallel = ddp
  }
  target a100 {
    device    = a100
    devices   = 8
    parallel  = ddp
    precision = fp16
  }
  target cpu {
    devices   = 1
    precision = fp32
    threads   = 1
    batch { micro = 4  global = 4 }
  }
}

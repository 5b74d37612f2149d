# BERT 1.5B pre-training (phase 1) with DeepSpeed ZeRO stage 1 on DL1 (Gaudi1)
# instances (seed 001: "Using DeepSpeed to accelerate PyTorch and training large
# language models on Habana Gaudi-based DL1 EC2 instances").
#
# Model: the BERT 1.5B model reference, 48 layers, hidden 1600, 25 heads (random
# init: an architecture, not a Hub checkpoint).  ZeRO-1 (optimizer states
# partitioned), BF16, data parallel over every accelerator.  Effective batch 384 per
# accelerator = micro-batch 16 x gradient accumulation 24; learning rate 0.0015 on
# 8 nodes, 0.003 on 16 nodes.  dl1.24xlarge = 8 Gaudi x 32 GB, 700 Gbps full-mesh
# RoCE inside the node, 4 EFA (400 Gbps) between nodes; the cluster is an AWS Batch
# multi-node parallel job with containers pulled from ECR.
#
# Sequences/s (seed 001), scaling efficiency = per-accelerator throughput at N nodes
# over the 1-node per-accelerator throughput:
#    1 node  (8 acc)      276.66   34.58/acc  100%
#    8 nodes (64 acc)   1,883.63   29.43/acc  85.1%
#   16 nodes (128 acc)  3,659.15   28.59/acc  82.7%
# Phase-1 convergence: ~25 h on 64 accelerators, ~15-16 h on 128.
#
# Two workloads because the learning rate differs with the node count and a target
# cannot override the optimizer.  The seed names the learning rate, not the
# optimizer: adamw here (the worker's choices are adamw, adam, sgd).
# Data: wikicorpus_en tokenized and sharded to h5 files (NVIDIA DeepLearningExamples
# recipe); those shards live on the cluster, so synthetic batches of the same shape
# (128 tokens, phase 1) here.

workload bert_1_5b_zero1_8n {
  description = "BERT 1.5B phase 1, ZeRO-1, bf16, 16 x 24 per accelerator, 1 and 8 dl1 nodes, lr 0.0015 (seed 001)"
  task pretrain { objective = mlm }
  model bert(layers = 48, hidden = 1600, heads = 25, ffn = 6400, vocab = 30522, max_positions = 512) {
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.0015)          # 0.0015 on 8 nodes; the seed gives none for 1 node
  precision bf16
  batch { micro = 16  accumulation = 24 }                   # 384 per accelerator
  measure { warmup = 3 steps  steps = 10 steps }            # optimizer steps (24 micro-steps each)

  engine aws_batch {
    job_queue      = "dl1-multinode-queue"                  # your AWS Batch queue
    job_definition = "bert-1-5b-deepspeed-mnp"              # multi-node parallel job definition
    image          = "ACCOUNT.dkr.ecr.us-east-1.amazonaws.com/habana-deepspeed-bert:latest"
    efa            = on
  }

  target dl1_1n {                      # 276.66 seq/s, 34.58 per accelerator (baseline)
    instance = dl1.24xlarge
    nodes    = 1
    devices  = 8
    parallel = zero(stage = 1)
    engine   = aws_batch
    batch { global = 3072 }            # 16 x 24 x 8
  }
  target dl1_8n {                      # 1,883.63 seq/s, 29.43 per accelerator, 85.1 %
    instance = dl1.24xlarge
    nodes    = 8
    devices  = 8
    parallel = zero(stage = 1)
    engine   = aws_batch
    batch { global = 24576 }           # 16 x 24 x 64
  }
  target cpu {
    devices   = 1
    precision = fp32
    threads   = 1
    batch { micro = 2  accumulation = 2  global = 4 }
  }
}

workload bert_1_5b_zero1_16n {
  description = "BERT 1.5B phase 1, ZeRO-1, bf16, 16 x 24 per accelerator, 16 dl1 nodes, lr 0.003 (seed 001)"
  task pretrain { objective = mlm }
  model bert(layers = 48, hidden = 1600, heads = 25, ffn = 6400, vocab = 30522, max_positions = 512) {
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.003)           # 0.003 on 16 nodes
  precision bf16
  batch { micro = 16  accumulation = 24 }
  measure { warmup = 3 steps  steps = 10 steps }

  engine aws_batch {
    job_queue      = "dl1-multinode-queue"
    job_definition = "bert-1-5b-deepspeed-mnp"
    image          = "ACCOUNT.dkr.ecr.us-east-1.amazonaws.com/habana-deepspeed-bert:latest"
    efa            = on
  }

  target dl1_16n {                     # 3,659.15 seq/s, 28.59 per accelerator, 82.7 %
    instance = dl1.24xlarge            # 16 x 13.11 usd/h
    nodes    = 16
    devices  = 8
    parallel = zero(stage = 1)
    engine   = aws_batch
    batch { global = 49152 }           # 16 x 24 x 128
  }
  target cpu {
    devices   = 1
    precision = fp32
    threads   = 1
    batch { micro = 2  accumulation = 2  global = 4 }
  }
}

# BERT 1.5B pre-training (phase 1, 001:15) with DeepSpeed ZeRO stage 1 on DL1 (Gaudi1)
# instances (seed 001: "Using DeepSpeed to accelerate PyTorch and training large
# language models on Habana Gaudi-based DL1 EC2 instances").  Each fact below cites its
# seed line (shared/seeds/001_3c72942091a9051d.txt, "001:N"); tests/language/seed_facts.txt keeps
# the same facts and tests/language/test_seed_workloads.py checks this file against them.
#
# Model (001:19): the BERT 1.5B model reference, 48 layers, hidden 1600, 25 heads,
# pre-trained from its configuration (random initial weights: an architecture, not a Hub
# checkpoint).  ZeRO-1 (optimizer states partitioned), BF16, data parallel over every
# accelerator (001:7, 001:17).  Effective batch 384 per accelerator = micro-batch 16 x
# gradient accumulation 24; learning rate 0.0015 on 8 nodes, 0.003 on 16 (001:37).
# dl1.24xlarge = 8 Gaudi x 32 GB, 700 Gbps full-mesh RoCE inside the node, 4 EFA
# (400 Gbps) between nodes; an AWS Batch multi-node parallel job with containers pulled
# from ECR (001:11, 001:13).  Software (001:17): SynapseAI 1.5 / 1.6 and Habana's fork of
# DeepSpeed -- not expressible in a workload yet (issue 29 item 2, a stack block).
#
# Sequences/s (001:42-44), scaling efficiency = per-accelerator throughput at N nodes
# over the 1-node per-accelerator throughput (001:27):
#    1 node  (8 acc)      276.66   34.58/acc  100%
#    8 nodes (64 acc)   1,883.63   29.43/acc  85.1%
#   16 nodes (128 acc)  3,659.15   28.59/acc  82.7%
# Phase-1 convergence: ~25 h on 64 accelerators, ~15-16 h on 128 (001:37, 001:50).
#
# What the seed leaves open, taken from the repository it names (001:19, "BERT 1.5B
# model reference": HabanaAI/Model-References PyTorch/nlp/pretraining/deepspeed-bert,
# scripts/run_bert_1.5b_8x.sh and scripts/deepspeed_config_bert_1.5b.json):
#   * optimizer: a LAMB-family optimizer (--optimizer=lans there, nvlamb in the AWS
#     workshop's launch_train.sh): lamb here, the closest the worker builds (timm's Lamb;
#     the plan says so).  Weight decay 0.01 (run_pretraining.py's parameter groups, which
#     exempt biases and LayerNorm; the worker decays every parameter).
#   * gradient clipping 1.0 ("gradient_clipping": 1.0 in the DeepSpeed config).
#   * schedule: warm-up 5% of the steps, constant 25%, then polynomial decay of degree 1
#     over max_steps 155,000 (--warmup_proportion 0.05 --constant_proportion 0.25
#     --scheduler_degree 1.0 --max_steps 155000, at the reference's own batch of 12,288).
#     The language has no learning-rate schedule yet: the measured steps run at the peak
#     rate (throughput does not depend on it).  train_steps is left unknown: the seed gives
#     the convergence time, not the step count (~25 h x 1,883.63 seq/s / 24,576 per step
#     would be ~6,900 steps; a derivation, not a published figure).
#   * sequences of 128 tokens, 20 masked predictions per sequence, masking probability
#     0.15 (hdf5_lower_case_1_seq_len_128_max_pred_20_masked_lm_prob_0.15 shards).
#   * data: wikicorpus_en tokenized and sharded to h5 (001:19, the NVIDIA
#     DeepLearningExamples recipe); those shards live on the cluster, so synthetic token
#     batches of the same shape here (docs/language.md 5).
#   * what is timed: the seed does not say; 3 warm-up and 10 counted optimizer steps
#     (24 micro-steps each) here.
# Two workloads because the learning rate differs with the node count.

workload bert_1_5b_zero1_8n {
  description = "BERT 1.5B phase 1, ZeRO-1, bf16, 16 x 24 per accelerator, 1 and 8 dl1 nodes, lr 0.0015 (seed 001)"
  task pretrain { objective = mlm }
  model bert(layers = 48, hidden = 1600, heads = 25, ffn = 6400, vocab = 30522, max_positions = 512) {
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128 tokens, mlm_probability = 0.15)   # wikicorpus_en h5 shards on the cluster
  optimizer lamb(lr = 0.0015, weight_decay = 0.01, grad_clip = 1.0)   # 001:37 lr; LANS-family, clip 1.0: the reference
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
  dataset synthetic(seq_len = 128 tokens, mlm_probability = 0.15)
  optimizer lamb(lr = 0.003, weight_decay = 0.01, grad_clip = 1.0)    # 001:37: 0.003 on 16 nodes
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

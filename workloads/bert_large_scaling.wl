# BERT-Large scaling baseline on 1 to 8 DL1 (Gaudi1) instances, DeepSpeed ZeRO-1,
# BF16, data parallel (seed 001: 001:7, 001:17).  Each fact cites its seed line
# (shared/seeds/001_3c72942091a9051d.txt, "001:N"); tests/language/seed_facts.txt keeps them.
# BERT-Large: 24 layers, hidden 1024, 16 heads, ~340M parameters (001:19), pre-trained from
# its configuration (random initial weights: bert-large-uncased's config, never its
# trained checkpoint).
#
# Sequences/s (001:29-33):
#   1 node  (8 acc)   1,379.76  172.47/acc  100%
#   2 nodes (16 acc)  2,705.57  169.10/acc  98.04%
#   4 nodes (32 acc)  5,291.58  165.36/acc  95.88%
#   8 nodes (64 acc)  9,977.54  155.90/acc  90.39%
# dl1.24xlarge: 8 x Gaudi1 32 GB (001:11), 13.11 usd/h per instance (the seeds: ~$13/h).
#
# The seed gives no batch size, optimizer or learning rate for this baseline: micro = 64
# per accelerator is an assumption (phase 1, 128 tokens: the reference's phase-1 shards),
# the optimizer is the default (adamw, lr 0.001); throughput does not depend on either.

workload bert_large_scaling {
  description = "BERT-Large phase 1 throughput on 1, 2, 4, 8 dl1.24xlarge, ZeRO-1, bf16 (seed 001)"
  task pretrain { objective = mlm }
  model hf("bert-large-uncased") {
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128 tokens)
  precision bf16
  batch { micro = 64 }
  measure { warmup = 5 steps  steps = 20 steps }

  engine aws_batch {
    job_queue      = "dl1-multinode-queue"
    job_definition = "bert-large-deepspeed-mnp"
    image          = "ACCOUNT.dkr.ecr.us-east-1.amazonaws.com/habana-deepspeed-bert:latest"
    efa            = on
  }

  target dl1_1n {                      # 1,379.76 seq/s  (172.47 per accelerator)
    instance = dl1.24xlarge
    nodes    = 1
    parallel = zero(stage = 1)
    engine   = aws_batch
  }
  target dl1_2n {                      # 2,705.57 seq/s  (169.10, 98.04 %)
    instance = dl1.24xlarge
    nodes    = 2
    parallel = zero(stage = 1)
    engine   = aws_batch
  }
  target dl1_4n {                      # 5,291.58 seq/s  (165.36, 95.88 %)
    instance = dl1.24xlarge
    nodes    = 4
    parallel = zero(stage = 1)
    engine   = aws_batch
  }
  target dl1_8n {                      # 9,977.54 seq/s  (155.90, 90.39 %)
    instance = dl1.24xlarge
    nodes    = 8
    parallel = zero(stage = 1)
    engine   = aws_batch
  }
  target cpu {
    devices   = 1
    precision = fp32
    threads   = 1
    batch { micro = 4 }
  }
}

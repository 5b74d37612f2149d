# Device check (issue 21): the BERT-Large step of bert_large_ddp.wl through DeepSpeed ZeRO
# stage 2 on ONE H100 (the deepspeed launcher, nccl, world size 1).  The optimizer is the
# worker's torch AdamW handed to deepspeed.initialize (no "optimizer" section in
# ds_config.json, so DeepSpeed JIT-builds no FusedAdam).

workload bert_large_zero2 {
  description = "BERT-Large MLM step, seq 128, micro-batch 32, bf16, DeepSpeed ZeRO-2 world size 1, one H100"
  task pretrain { objective = mlm }
  model hf("bert-large-uncased") {
    weights  = random
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.0001)
  precision bf16
  batch { micro = 32 }
  measure { warmup = 3 steps  steps = 15 steps }

  target h100 { device = h100  devices = 1  parallel = zero(stage = 2) }
  target h200 { device = h200  devices = 1  parallel = zero(stage = 2) }
}

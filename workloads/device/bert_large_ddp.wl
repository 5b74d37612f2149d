# Device check (issue 21): a BERT-Large masked-LM step under plain DDP on ONE H100:
# torchrun with one process, the nccl process group (world size 1) and the model in
# DistributedDataParallel, as an 8-GPU run would be minus the other ranks.  No seed figure
# for one H100: compare with bert_large_zero2.wl (the same step through DeepSpeed ZeRO-2).

workload bert_large_ddp {
  description = "BERT-Large MLM step, seq 128, micro-batch 32, bf16, DDP (nccl) world size 1, one H100"
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

  target h100 { device = h100  devices = 1  parallel = ddp }
  target h200 { device = h200  devices = 1  parallel = ddp }
}

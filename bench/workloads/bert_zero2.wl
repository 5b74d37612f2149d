# bench: the same BERT as bert_mlm.wl, 2 ranks of DeepSpeed ZeRO-2 (gloo), one thread each.
# Faced by bench/baselines/ds_zero2.py under torchrun.
workload bench_bert_zero2 {
  description = "BERT 4x256 masked LM, 2 ranks DeepSpeed ZeRO-2 on CPU (python -m bench)"
  seed = 0
  task pretrain { objective = mlm }
  model bert(layers = 4, hidden = 256, heads = 4, ffn = 1024, vocab = 1000, max_positions = 512)
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1  global = 8 }
  measure { warmup = 3 steps  steps = 20 steps }
  target cpu {
    devices  = 2
    parallel = zero(stage = 2)
    threads  = 1
  }
}

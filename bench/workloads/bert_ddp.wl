# bench: the same BERT as bert_mlm.wl, 2 ranks of plain DDP (gloo, through torchrun), one thread
# each.  Faced by bench/baselines/accelerate_bert.py under `accelerate launch --multi_gpu --cpu
# --num_processes 2` (bench/comparisons/bert_accelerate_ddp.py).
workload bench_bert_ddp {
  description = "BERT 4x256 masked LM, 2 ranks DDP (gloo) on CPU (python -m bench)"
  seed = 0
  task pretrain { objective = mlm }
  model bert(layers = 4, hidden = 256, heads = 4, ffn = 1024, vocab = 1000, max_positions = 512)
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1  global = 8 }
  measure { warmup = 3 steps  steps = 15 steps }
  target cpu {
    devices  = 2
    parallel = ddp
    threads  = 1
  }
}

# bench: a Llama 4 layers x 256 hidden (4 heads, ffn 688, vocab 1000, untied head), causal LM on
# sequences of 128, micro-batch 4, fp32, 2 gloo ranks of one thread each: FSDP2 (each rank its data
# shard: 8 samples a step) and tensor parallel (tp = 2: both ranks read one shard, 4 samples a
# step).  Faced by bench/baselines/llama_parallel.py under torchrun (bench/comparisons/llama_fsdp.py,
# llama_tp.py).
workload bench_llama_2ranks {
  description = "Llama 4x256 causal LM, 2 gloo ranks: FSDP2 and tensor parallel (python -m bench)"
  seed = 0
  task pretrain { objective = causal_lm }
  model llama(layers = 4, hidden = 256, heads = 4, ffn = 688, vocab = 1000, max_positions = 512)
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1 }
  measure { warmup = 3 steps  steps = 12 steps }
  target fsdp {
    device   = cpu
    devices  = 2
    parallel = fsdp
    threads  = 1
  }
  target tp {
    device   = cpu
    devices  = 2
    parallel = tensor(tp = 2)
    threads  = 1
  }
}

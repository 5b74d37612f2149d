# Small local workloads for quick experiments: a 2-layer GPT-2 with random weights,
# trained and sampled on this machine's CPU in a few seconds.  No seed figures.

workload tiny_gpt2_train {
  description = "2-layer GPT-2, causal LM on synthetic tokens, CPU"
  seed = 0
  task pretrain { objective = causal_lm }
  model gpt2(layers = 2, hidden = 64, heads = 4, vocab = 1000, max_positions = 128)
  dataset synthetic(seq_len = 64 tokens)
  optimizer adamw(lr = 0.001, weight_decay = 0.01, grad_clip = 1.0)
  precision fp32
  batch { micro = 8  accumulation = 2  global = 16 }
  measure { warmup = 2 steps  steps = 10 steps }
  target cpu { devices = 1  threads = 1 }
}

workload tiny_gpt2_generate {
  description = "2-layer GPT-2, greedy generation of 32 tokens, CPU"
  task generate {
    prompt         = "Hello, accelerators"
    max_new_tokens = 32 tokens
    decoding       = greedy
    kv_cache       = on
    batch_size     = 1
  }
  model gpt2(layers = 2, hidden = 64, heads = 4, vocab = 1000, max_positions = 128)
  precision fp32
  measure { warmup = 1 step  steps = 5 steps }
  target cpu { devices = 1  threads = 1 }
}

# bench: greedy generation of 100 tokens with the 2-layer BLOOM stand-in of workloads/bloomz.wl
# (vocab 1000, the 41-token prompt), fp32, one thread, a static (pre-allocated) KV cache and the
# decoding step compiled (transformers' CompileConfig: what a static cache is for).
# Faced by bench/baselines/generate.py with the same shape and the default dynamic cache
# (comparison gen_static_cache).
workload bench_gen_static {
  description = "BLOOM stand-in, greedy 100 tokens, static KV cache, compiled decoding (python -m bench)"
  seed = 0
  task generate {
    prompt         = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100 tokens
    decoding       = greedy
    kv_cache       = static
    batch_size     = 1
  }
  model bloom(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  precision fp32
  measure { warmup = 2 steps  steps = 5 steps }
  optimize { compile = on }
  target cpu { devices = 1  threads = 1 }
}

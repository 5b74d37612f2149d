# Device check (issue 21): seed 003's BLOOMZ-7B1 greedy generation on ONE H100.
#
# Seed 003: batch 1, greedy search, 100 new tokens, KV cache on, prompt "DeepSpeed is a
# machine learning framework"; BLOOMZ-7B on one A100 80GB: 2.119 s per generate() call.
# The architecture is the catalog's bigscience/bloomz-7b1 (30 layers, hidden 4096, 32 heads,
# vocab 250880, 7.07 B parameters) with random fp16 weights, built on the GPU; the prompt
# goes through the byte stand-in tokenizer (41 ids, not BLOOM's 7).  min_new_tokens = 100:
# exactly 100 tokens, EOS or not.

workload bloomz_7b1_1gpu {
  description = "BLOOMZ-7B1 fp16 greedy generation of 100 tokens, batch 1, one H100 (seed 003)"
  task generate {
    prompt         = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100 tokens
    decoding       = greedy
    kv_cache       = on
    batch_size     = 1
  }
  model hf("bigscience/bloomz-7b1") {
    weights  = random
    stand_in = bloom(layers = 2, hidden = 64, heads = 4)
  }
  precision fp16
  measure { warmup = 1 steps  steps = 3 steps }

  target h100 { device = h100  devices = 1 }
  target h200 { device = h200  devices = 1 }
}

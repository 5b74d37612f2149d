# bench: GPT-2 4 layers x 256 hidden (ffn 4 x hidden = 1024, vocab 1000), causal LM on sequences of 128,
# batch 4, fp32, one thread -- the BERT bench workload's size in a decoder, for
# bench/mfu_breakdown.py.
workload bench_gpt2_clm {
  description = "GPT-2 4x256 causal LM, seq 128, random weights, synthetic tokens (bench/mfu_breakdown.py)"
  seed = 0
  task pretrain { objective = causal_lm }
  model gpt2(layers = 4, hidden = 256, heads = 4, vocab = 1000, max_positions = 512)
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4 }
  measure { warmup = 3 steps  steps = 20 steps }
  target cpu { devices = 1  threads = 1 }
}

# bench: BERT 4 layers x 256 hidden (ffn 1024, vocab 1000: every dimension written out, as the
# baseline builds it; the stand-in defaults differ), masked LM on sequences of 128, batch 4, fp32, one
# thread.  Faced by bench/baselines/bert_mlm.py (and
# accelerate_bert.py) with the same shape.
workload bench_bert_mlm {
  description = "BERT 4x256 masked LM, seq 128, random weights, synthetic tokens (python -m bench)"
  seed = 0
  task pretrain { objective = mlm }
  model bert(layers = 4, hidden = 256, heads = 4, ffn = 1024, vocab = 1000, max_positions = 512)
  dataset synthetic(seq_len = 128 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4 }
  measure { warmup = 3 steps  steps = 20 steps }
  target cpu { devices = 1  threads = 1 }
}

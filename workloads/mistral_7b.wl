# Mistral-7B greedy generation latency, as run_generation.py measures it (100 new tokens
# after a short prompt, batch 1, KV cache on), on one H100, one Gaudi2 and a CPU stand-in.
#
# Shape from the model's own config.json (configs/Mistral-7B-v0.1.json): 32 layers, hidden
# 4096, 32 query heads over 8 key/value heads (grouped-query attention: the KV cache is a
# quarter of multi-head attention's), SwiGLU 14336, vocabulary 32000: 7.24 B parameters,
# 14.48 GB in bf16.  Inferentia/Trainium targets are not here: Neuron generation goes through
# optimum-neuron's causal-LM export, and optimum-neuron 0.4.5 has no Neuron decoder for
# mistral (it exports granite, llama, llama4_text, mixtral, phi3, qwen2, qwen3, qwen3_moe,
# smollm3; plan refuses such a target at its model line), while 14.48 GB of weights leave no
# room on one 16 GB NeuronCore without that export's tensor parallelism.

workload mistral_7b_generate {
  description = "Mistral-7B greedy generation, 100 new tokens, bf16, batch 1: H100, Gaudi2"
  task generate {
    prompt         = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100
    decoding       = greedy
    kv_cache       = on
    batch_size     = 1
  }
  model hf("mistralai/Mistral-7B-v0.1") { config = "configs/Mistral-7B-v0.1.json" }
  precision bf16
  measure { warmup = 2 steps  steps = 5 steps }

  target h100   { instance = p5.48xlarge  devices = 1 }
  target gaudi2 { device = gaudi2  instance = gaudi2-hls  devices = 1  hpu_graphs = on }
  target cpu    { devices = 1  precision = fp32 }
}

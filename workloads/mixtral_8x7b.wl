# Mixtral-8x7B: a mixture of experts whose memory holds all 8 experts of every layer
# (46.7 B parameters, 93.4 GB in bf16) while each token runs through 2 of them (12.9 B
# active parameters: what the FLOPs count).  Shape from its config.json
# (configs/Mixtral-8x7B-v0.1.json: 32 layers, hidden 4096, 32 heads over 8 key/value heads,
# 8 experts of SwiGLU 14336, 2 per token, vocabulary 32000).
#
# Generation shards it 8 ways with DeepSpeed-inference (AutoTP) on a p5.48xlarge and on a
# Gaudi2 server, and 16 ways over the NeuronCores of an inf2.48xlarge through optimum-neuron's
# causal-LM export (tp_degree 16: 5.84 GB of weights per 16 GB core; 16 of its 24 cores, as the
# 32 query heads then split evenly and the 8 key/value heads are replicated twice).
# Fine-tuning shards weights, gradients and Adam states with ZeRO-3 over 2 x 8 H100;
# optimum-neuron 0.4.5 trains no Mixtral (its neuronx-distributed training models are
# llama, qwen3 and granite), so there is no Trainium training target.

workload mixtral_8x7b_generate {
  description = "Mixtral-8x7B greedy generation, 100 new tokens, bf16, tensor parallel 8: H100, Gaudi2; 16: Inf2"
  task generate {
    prompt         = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100
    decoding       = greedy
    kv_cache       = on
    batch_size     = 1
  }
  model hf("mistralai/Mixtral-8x7B-v0.1") { config = "configs/Mixtral-8x7B-v0.1.json" }
  precision bf16
  measure { warmup = 2 steps  steps = 5 steps }

  target h100   { instance = p5.48xlarge  parallel = deepspeed_inference(tp = 8) }
  target gaudi2 { device = gaudi2  instance = gaudi2-hls  devices = 8  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on }
  target inf2   { instance = inf2.48xlarge  devices = 16  parallel = tensor(tp = 16) }
  target cpu    { devices = 1  precision = fp32 }
}

workload mixtral_8x7b_zero3 {
  description = "Mixtral-8x7B fine-tune, ZeRO-3, bf16, 2048 tokens, 2 x 8 H100"
  task finetune { objective = causal_lm }
  model hf("mistralai/Mixtral-8x7B-v0.1") { config = "configs/Mixtral-8x7B-v0.1.json" }
  dataset synthetic(seq_len = 2048 tokens)
  optimizer adamw(lr = 0.00001)
  precision bf16
  gradient_checkpointing = on
  batch { micro = 1 }
  measure { warmup = 2 steps  steps = 10 steps }

  target h100 { instance = p5.48xlarge  nodes = 2  parallel = zero(stage = 3) }
  target cpu  {                        # the mixtral stand-in (4 experts, 2 per token)
    devices   = 1
    precision = fp32
    optimizer adamw(lr = 0.001)        # a tiny random model learns at a tiny model's rate
    measure { warmup = 1 steps  steps = 4 steps }
  }
}

# Llama-2-70B: full fine-tuning sharded two ways on 4 x 8 H100, ZeRO-3 on 4 Gaudi2 servers,
# and greedy generation split over the NeuronCores of an inf2.48xlarge (issue 24).
#
# Shape from the model's own config.json (configs/Llama-2-70b-hf.json: 80 layers, hidden
# 8192, 64 query heads over 8 key/value heads, SwiGLU 28672, vocabulary 32000, untied head):
# 68.98 B parameters, 137.96 GB in 16-bit -- more than any one device holds, so every
# accelerator target below shards it, and each plan prints the memory per device of its split:
#
# * h100: FSDP x tensor parallel on one DeviceMesh (tp 8 inside each p5.48xlarge over NVLink,
#   FSDP over the 4 nodes): each GPU holds 1/8 of every block (its heads and MLP columns) and
#   1/4 of that 1/8 as FSDP shard, plus one gathered block;
# * gaudi2: DeepSpeed ZeRO-3 (Habana's DeepSpeed fork, the optimum-habana DeepSpeed path)
#   over 4 x 8 Gaudi2: weights, gradients and Adam states (16 bytes a parameter) 1/32 each,
#   in eager mode;
# * inf2: optimum-neuron's causal-LM export with tensor parallel 24 (tp_degree): 5.75 GB of
#   weights per NeuronCore, query heads padded from 64 to 72, key/value heads replicated to 24.
#
# The weights come from the Hub or the target machine's HF cache at run time; cpu targets run
# the llama stand-in.

workload llama2_70b_finetune {
  description = "Llama-2-70B full fine-tune, bf16, 4096 tokens: FSDP x TP on 4 x 8 H100, ZeRO-3 on 4 x 8 Gaudi2"
  task finetune { objective = causal_lm }
  model hf("meta-llama/Llama-2-70b-hf") { family = llama  config = "configs/Llama-2-70b-hf.json" }
  dataset synthetic(seq_len = 4096 tokens)
  optimizer adamw(lr = 0.00001)
  precision bf16
  gradient_checkpointing = on
  batch { micro = 1  accumulation = 8 }
  measure { warmup = 2 steps  steps = 10 steps }

  target h100 {                        # 4 x p5.48xlarge: tp 8 in a node, FSDP over the nodes
    instance = p5.48xlarge
    nodes    = 4
    parallel = fsdp(tp = 8)
  }
  target gaudi2 {                      # 4 Gaudi2 servers, DeepSpeed ZeRO-3 over the 32 cards
    device   = gaudi2
    instance = gaudi2-hls
    nodes    = 4
    devices  = 8
    parallel = zero(stage = 3)
    lazy_mode = off                    # lazy mode's first-iteration graph would hold every
  }                                    # layer's activations (1.03 TB at 4096 tokens)
  target cpu {                         # the llama stand-in, runs anywhere
    devices   = 1
    precision = fp32
    optimizer adamw(lr = 0.001)        # a tiny random model learns at a tiny model's rate
    measure { warmup = 1 steps  steps = 4 steps }
  }
}

workload llama2_70b_generate {
  description = "Llama-2-70B generation, 100 new tokens, batch 1: inf2.48xlarge (tp 24), H100 and Gaudi2 (tp 8)"
  task generate {
    prompt         = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100
    decoding       = greedy
    kv_cache       = on
    batch_size     = 1
  }
  model hf("meta-llama/Llama-2-70b-hf") { family = llama  config = "configs/Llama-2-70b-hf.json" }
  precision bf16
  measure { warmup = 2 steps  steps = 5 steps }

  target inf2   { instance = inf2.48xlarge  devices = 24  parallel = tensor(tp = 24) }
  target h100   { instance = p5.48xlarge  parallel = deepspeed_inference(tp = 8) }
  target gaudi2 { device = gaudi2  instance = gaudi2-hls  devices = 8  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on }
  target cpu    { devices = 1  precision = fp32 }
}

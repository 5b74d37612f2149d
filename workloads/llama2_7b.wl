# Llama-2-7B fine-tuning with DeepSpeed ZeRO-3 on 2 x 8 H100 under Slurm -- the job this
# tool's users run most (issue 23) -- and the same step on Gaudi2 and Trainium.
#
# The model is named by its Hub id; its shape comes from its own config.json, kept beside
# this file (configs/Llama-2-7b-hf.json: 32 layers, hidden 4096, 32 heads, 32 key/value
# heads, SwiGLU 11008, vocabulary 32000, untied head), so plan and estimate need no network:
# 6.74 B parameters, 13.48 GB of bf16 weights.  The weights themselves come from the Hub or
# the target machine's HF cache at run time; a cpu target runs the llama stand-in.
#
# 6.74 B parameters with their gradients and Adam states (107.8 GB) do not fit a 16 GB
# NeuronCore data parallel, so the Trainium target splits the model the way optimum-neuron
# does (neuronx-distributed): tensor parallel 8 inside each group of 8 NeuronCores and ZeRO-1
# over the 4 groups of a trn1.32xlarge -- 1/8 of the weights and gradients and 1/32 of the
# Adam states per core, 12.4 GB of 16 at micro-batch 4.  It runs optimum-neuron's finetune_llama.py.

workload llama2_7b_zero3 {
  description = "Llama-2-7B fine-tune, ZeRO-3, bf16, 2048 tokens, 2 x 8 H100 (Slurm), Gaudi2; TP 8 x ZeRO-1 on Trn1"
  task finetune { objective = causal_lm }
  model hf("meta-llama/Llama-2-7b-hf") {
    family = llama
    config = "configs/Llama-2-7b-hf.json"
  }
  dataset synthetic(seq_len = 2048 tokens)
  optimizer adamw(lr = 0.00002)
  precision bf16
  gradient_checkpointing = on
  batch { micro = 4 }
  measure { warmup = 2 steps  steps = 10 steps }

  engine slurm {
    partition  = "h100"
    time_limit = 2 h
  }

  target h100 {                        # 2 x p5.48xlarge, one launcher per node
    instance = p5.48xlarge
    nodes    = 2
    parallel = zero(stage = 3)
    engine   = slurm
  }
  target gaudi2 {                      # one Gaudi2 server, DeepSpeed on HPU; lazy mode's
    device   = gaudi2                  # first-iteration graph holds every layer's activations
    instance = gaudi2-hls              # twice (checkpointing or not): micro-batch 1
    devices  = 8
    parallel = zero(stage = 3)
    batch { micro = 1 }
  }
  target trn1 {                        # one trn1.32xlarge: 32 NeuronCores, tp 8 x ZeRO-1 over 4
    instance = trn1.32xlarge
    parallel = zero(stage = 1, tp = 8)
  }
  target cpu {                         # the llama stand-in, runs anywhere
    devices   = 1
    precision = fp32
    optimizer adamw(lr = 0.001)        # a tiny random model learns at a tiny model's rate
    measure { warmup = 1 steps  steps = 4 steps }
  }
}

workload llama2_7b_infer {
  description = "Llama-2-7B forward pass (scoring) of 512-token sequences, bf16: H100, Gaudi2, Trn1"
  task infer { batch_size = 1 }
  model hf("meta-llama/Llama-2-7b-hf") { config = "configs/Llama-2-7b-hf.json" }
  dataset synthetic(seq_len = 512 tokens)
  precision bf16
  measure { warmup = 2 steps  steps = 10 steps }

  target h100   { instance = p5.48xlarge  devices = 1 }
  target gaudi2 { device = gaudi2  instance = gaudi2-hls  devices = 1 }
  target trn1   { instance = trn1.2xlarge  devices = 1 }
  target cpu    { devices = 1  precision = fp32  measure { warmup = 1 steps  steps = 3 steps } }
}

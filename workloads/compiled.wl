# torch.compile, channels-last and a static KV cache as workload options (issue 12).
#
# optimize { } holds how the worker runs the model: torch.compile (inductor; on this CPU it
# needs a C++ compiler: g++ 12 here) and the channels-last memory format of image models.
# Compilation happens in the warm-up steps and is reported apart (compile_s, compiles,
# recompiles after warm-up); the measured steps run the compiled model.  A target may
# override the workload's keys: Gaudi compiles through lazy mode / HPU graphs and refuses
# compile = on (E221), so its target turns it off.

workload vit_compiled {
  description = "ViT-B/16 classification step, compiled and channels-last"
  seed = 0
  task pretrain { objective = classification }
  model vit(layers = 12, hidden = 768, heads = 12, image_size = 224, patch = 16, classes = 1000) {
    stand_in = vit(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(image_size = 224, channels = 3, classes = 1000)
  optimizer adamw(lr = 0.001)
  precision bf16
  batch { micro = 32 }
  measure { warmup = 3 steps  steps = 20 steps }
  optimize { compile = on  channels_last = on }

  target a100 { device = a100  optimize { compile_mode = max-autotune } }
  target gaudi2 { device = gaudi2  optimize { compile = off } }   # its own graph modes
  target gaudi2_compiled { device = gaudi2 }                      # refused: E221
  target cpu { devices = 1  threads = 1  precision = fp32  micro_batch = 4 }
}

# Greedy generation with a pre-allocated (static) KV cache: fixed shapes, so the decoding
# step compiles once (transformers' own CompileConfig) instead of once per token.
workload gpt2_static_cache {
  description = "2-layer GPT-2, greedy generation of 32 tokens, static KV cache, compiled decoding"
  task generate {
    prompt         = "Hello, accelerators"
    max_new_tokens = 32 tokens
    decoding       = greedy
    kv_cache       = static
    batch_size     = 1
  }
  model gpt2(layers = 2, hidden = 64, heads = 4, vocab = 1000, max_positions = 128)
  precision fp32
  measure { warmup = 2 steps  steps = 5 steps }
  optimize { compile = on }
  target cpu { devices = 1  threads = 1 }
  target cpu_eager { device = cpu  devices = 1  threads = 1  optimize { compile = off } }
}

# Stable Diffusion inference latency on Gaudi1, Gaudi2 and A100 80GB (seed 000:
# "Faster training and inference: Habana Gaudi2 vs NVIDIA A100 80GB", Optimum Habana
# GaudiStableDiffusionPipeline).
#
# Batch 8 images per call, one device, bf16 on Gaudi, fp16 on A100; the first 2
# batches are discarded (graph compilation).  Latency per batch of 8 (seed 000):
#   Gaudi1 3.25 s   A100 2.63 s   Gaudi2 0.925 s   (Gaudi2: x3.51 vs Gaudi1, x2.84 vs A100)
#
# The seed does not give the model revision, the number of denoising steps or the
# number of timed batches: CompVis/stable-diffusion-v1-4 and the pipeline's default
# 50 steps here, 5 timed batches.

workload stable_diffusion {
  description = "Stable Diffusion v1 inference, batch 8, single device (seed 000)"
  task infer {
    batch_size      = 8
    inference_steps = 50 steps
    guidance_scale  = 7.5
  }
  model hf("CompVis/stable-diffusion-v1-4") {
    stand_in = stable_diffusion()      # tiny UNet / VAE / text encoder, random weights
  }
  dataset synthetic                    # prompts
  precision bf16
  measure { warmup = 2 steps  steps = 5 steps }             # first 2 batches discarded

  target gaudi1 {                      # 3.25 s per batch
    device     = gaudi
    devices    = 1
    hpu_graphs = on
  }
  target gaudi2 {                      # 0.925 s per batch
    device     = gaudi2
    devices    = 1
    hpu_graphs = on
  }
  target a100 {                        # 2.63 s per batch
    device    = a100
    devices   = 1
    precision = fp16
  }
  target cpu {
    devices     = 1
    precision   = fp32
    threads     = 1
    micro_batch = 1                  # 50 denoising steps per image: keep the CPU batch small
  }
  # The seed's own path: optimum-habana's text_to_image_generation.py with the
  # Habana/stable-diffusion Gaudi configuration, 2 + 5 batches of 8, the first 2 untimed.
  target gaudi2_example {
    device     = gaudi2
    devices    = 1
    hpu_graphs = on
    script     = example
  }
}

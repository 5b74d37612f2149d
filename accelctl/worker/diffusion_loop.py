"""Stable Diffusion inference with the real diffusers components, written out by hand.

text ids -> CLIP text encoder -> (unconditional, conditional) embeddings -> ``inference_steps``
UNet denoising steps with classifier-free guidance -> VAE decode -> images.
One step event = one batch of ``micro_batch`` images; its latency is what seed 000 reports
(the seed discards the first 2 batches: graph compilation, here the warm-up phase).
"""

from __future__ import annotations

import contextlib
import time

import torch
from accelctl.worker.flops import counter as flops_counter

from accelctl.worker import models, optimize
from accelctl.worker.context import RunContext
from accelctl.worker.generate_loop import schedule


def run(ctx: RunContext) -> tuple[int, dict]:
    job, adapter = ctx.job, ctx.adapter
    if job.task.kind not in ("infer", "generate"):
        raise ValueError(f"stable_diffusion supports task infer (image generation), not {job.task.kind!r}")
    steps_per_image = job.task.inference_steps or 4
    guidance = job.task.guidance_scale
    cfg = guidance > 1.0  # classifier-free guidance doubles the UNet batch

    # 1. components on the device, eval, 16-bit weights if asked -------------------------
    t0 = time.perf_counter()
    built = models.build(job, ctx.log)
    sd: models.SDParts = built.model
    dtype = ctx.precision.dtype or torch.float32
    for name in ("unet", "vae", "text_encoder"):
        part = getattr(sd, name).to(adapter.device).eval()
        if dtype != torch.float32:
            part = part.to(dtype)
        if name == "unet":  # channels-last, torch.compile: the UNet, where the denoising time goes
            part = optimize.apply(part, job, ctx.log)
        setattr(sd, name, adapter.prepare_inference(part))
    ctx.setup_s["build_s"] = time.perf_counter() - t0

    # 2. text ids: the prompt through the real CLIP tokenizer, else random ids (stand-in) ---
    mb = job.batch.micro
    text_len = sd.text_encoder.config.max_position_embeddings
    g = torch.Generator().manual_seed(job.seed + ctx.rank)
    if built.weights == "real" and job.task.prompt:
        tok = sd.tokenizer
        enc = lambda texts: tok(texts, padding="max_length", max_length=text_len, truncation=True,  # noqa: E731
                                return_tensors="pt").input_ids
        cond_ids, uncond_ids = enc([job.task.prompt] * mb), enc([""] * mb)
    else:
        vocab = sd.text_encoder.config.vocab_size
        cond_ids = torch.randint(4, vocab, (mb, text_len), generator=g)
        uncond_ids = torch.zeros(mb, text_len, dtype=torch.long)  # all padding: the "empty prompt"
    cond_ids, uncond_ids = cond_ids.to(adapter.device), uncond_ids.to(adapter.device)
    vae_scale = 2 ** (len(sd.vae.config.block_out_channels) - 1)
    latent_hw = sd.unet.config.sample_size
    ctx.started({**built.details(), "inference_steps": steps_per_image, "guidance_scale": guidance,
                 "image_size": latent_hw * vae_scale, "latent_size": latent_hw, "text_len": text_len,
                 "scheduler": type(sd.scheduler).__name__})

    @torch.inference_mode()
    def images_for_batch() -> torch.Tensor:
        # 3. prompt embeddings (the unconditional ones are recomputed per batch, as pipelines do)
        emb = sd.text_encoder(cond_ids)[0]
        if cfg:
            emb = torch.cat([sd.text_encoder(uncond_ids)[0], emb])
        # 4. denoise from Gaussian latents
        sd.scheduler.set_timesteps(steps_per_image, device=adapter.device)
        latents = torch.randn(mb, sd.unet.config.in_channels, latent_hw, latent_hw, generator=g)
        latents = (latents.to(adapter.device, dtype) * sd.scheduler.init_noise_sigma)
        for t in sd.scheduler.timesteps:
            inp = torch.cat([latents] * 2) if cfg else latents
            inp = sd.scheduler.scale_model_input(inp, t)
            noise = sd.unet(inp, t, encoder_hidden_states=emb).sample
            if cfg:
                uncond, cond = noise.chunk(2)
                noise = uncond + guidance * (cond - uncond)
            latents = sd.scheduler.step(noise, t, latents).prev_sample
            adapter.mark_step()
        # 5. decode latents to images in [0, 1]
        images = sd.vae.decode(latents / sd.vae.config.scaling_factor).sample
        return (images / 2 + 0.5).clamp(0, 1)

    # 6. warm-up batches (excluded), then repeat x steps measured batches ------------------
    # (FLOPs of one batch counted once, on the first batch: UNet, text encoder and VAE)
    step, latencies, shape, flops = 0, [], None, None
    for phase, repeat, count in schedule(job):
        ctx.phase(phase, repeat)
        for _ in range(count):
            step += 1
            counting = flops is None
            adapter.reset_peak_memory()
            with flops_counter() if counting else contextlib.nullcontext() as counter:
                adapter.sync()
                t_start = time.perf_counter()
                images = images_for_batch()
                adapter.sync()
                dt = time.perf_counter() - t_start
            if counting:
                flops = counter.get_total_flops()
            if not torch.isfinite(images).all():
                raise RuntimeError(f"non-finite pixels in batch {step}")
            shape = list(images.shape)
            samples = mb * ctx.data_parallel
            ctx.step(step=step, phase=phase, repeat=repeat, step_time_s=dt, samples=samples,
                     samples_per_s=samples / dt, mfu=ctx.mfu(flops, dt), mem_bytes=adapter.memory_bytes())
            if phase == "measure":
                latencies.append(dt)
    ctx.phase("done")
    return step, {"image_shape": shape, "flops_per_batch": flops, "mean_latency_s": sum(latencies) / len(latencies) if latencies else None,
                  **adapter.compile_stats()}

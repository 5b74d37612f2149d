"""Inference loops: greedy generation with per-token timing (task generate), and forward
passes only (task infer).  One StepMetrics per ``generate`` call / forward pass.

16-bit inference casts the weights (as 16-bit serving does, seed 003) instead of autocasting.
"""

from __future__ import annotations

import contextlib
import statistics
import time

import torch

from accelctl.worker import data, models, optimize
from accelctl.worker.context import RunContext, SequenceTooLong


class TokenClock:
    """A ``generate`` streamer that timestamps every new token.

    ``generate`` calls ``put`` once with the prompt (decoder start for encoder-decoders),
    then once per generated token, after that token is chosen (``tokens.cpu()`` syncs).
    """

    def __init__(self) -> None:
        self.prompt_seen = False
        self.times: list[float] = []

    def put(self, value) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def prepare(ctx: RunContext) -> models.Built:
    """Build the model for inference: eval mode, on the device, 16-bit weights if asked."""
    job, adapter = ctx.job, ctx.adapter
    t0 = time.perf_counter()
    weights = ctx.precision.dtype if ctx.precision.name in ("bf16", "fp16") else None  # 16-bit serving
    built = models.build(job, ctx.log, device=adapter.random_init_device(), dtype=weights)
    model = built.model.to(adapter.device).eval()
    if ctx.precision.dtype is not None and ctx.precision.name != "fp8":
        model = model.to(ctx.precision.dtype)
    model = optimize.apply(model, job, ctx.log)  # infer: channels-last, torch.compile; generate: see run()
    # DeepSpeed-inference: tensor-parallel shards (AutoTP or kernels); plain: the model as is
    model = ctx.strategy.prepare_inference(model, ctx)
    built.model = adapter.prepare_inference(model)
    ctx.setup_s["build_s"] = time.perf_counter() - t0
    return built


def schedule(job) -> list[tuple[str, int, int]]:
    """(phase, repeat, calls): warm-up once, then ``repeat`` measured rounds."""
    return [("warmup", 0, job.measure.warmup)] + [("measure", r, job.measure.steps) for r in range(job.measure.repeat)]


def reports_mfu(job) -> bool:
    """Greedy generation reports latency and tokens/s, no MFU (so the worker probes no peak);
    ``infer`` (batched forward passes) does."""
    return job.task.kind != "generate"


def run(ctx: RunContext) -> tuple[int, dict]:
    job = ctx.job
    if job.task.kind == "infer":
        return run_infer(ctx)
    built = prepare(ctx)
    if built.kind not in (models.CAUSAL_LM, models.SEQ2SEQ):
        raise ValueError(f"task generate needs a causal LM or seq2seq family, not {job.model.family!r}")
    model, adapter, tok = built.model, ctx.adapter, built.tokenizer
    n_new = job.task.max_new_tokens
    if n_new <= 0:
        raise ValueError("task generate needs max_new_tokens > 0")
    # decoding = sample: transformers' multinomial sampling (its generation config's top-k and
    # temperature), from torch's generator seeded with the workload's seed before the first call
    sample_tokens = job.task.decoding == "sample"
    if sample_tokens:
        torch.manual_seed(job.seed)
    prompts = data.prompt_ids(job, built, ctx.log)
    first = next(prompts)
    limit, fed = models.position_limit(built), len(first[0]) + n_new - 1  # the last new token is not fed back
    if limit is not None and fed > limit:  # generate() would index past the position embeddings
        raise SequenceTooLong(f"the prompt is {len(first[0])} tokens with {type(tok).__name__}: + max_new_tokens "
                              f"{n_new} takes {fed} positions, more than {job.model.family}'s {limit}; lower "
                              f"max_new_tokens to at most {limit - len(first[0]) + 1} or shorten the prompt")
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    read = prompts.details if job.data.kind != "synthetic" else {}
    ctx.started({**built.details(), **read, "prompt": job.task.prompt, "prompt_tokens": len(first[0]),
                 "max_new_tokens": n_new, "kv_cache": job.task.kv_cache, "decoding": job.task.decoding,
                 "kv_cache_layout": job.task.kv_cache_layout if job.task.kv_cache else "off"})
    cache_and_compile = optimize.generate_kwargs(job, model)  # static KV cache, transformers' compile

    step, latencies, sample, at_measure = 0, [], None, None
    for phase, repeat, count in schedule(job):
        ctx.phase(phase, repeat)
        if phase == "measure" and repeat == 0:
            at_measure = adapter.compile_stats()  # compiled decoding: graphs of the warm-up calls
        for _ in range(count):
            step += 1
            ids = torch.tensor(first if step == 1 else next(prompts), device=adapter.device)
            clock = TokenClock()
            adapter.reset_peak_memory()
            adapter.sync()
            t0 = time.perf_counter()
            with torch.inference_mode():
                # greedy or sampled, and min_new_tokens == max_new_tokens: exactly n_new tokens, EOS or not
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                                     min_new_tokens=n_new, do_sample=sample_tokens, num_beams=1,
                                     use_cache=job.task.kv_cache, pad_token_id=pad, streamer=clock,
                                     **cache_and_compile)
            adapter.sync()
            latency = time.perf_counter() - t0
            new = out.shape[1] - (1 if built.kind == models.SEQ2SEQ else ids.shape[1])
            if new != n_new or len(clock.times) != n_new:
                raise RuntimeError(f"generate produced {new} new tokens ({len(clock.times)} timed), expected {n_new}")
            # time to first token = prefill + first decode; then the mean gap between tokens
            gaps = [b - a for a, b in zip(clock.times, clock.times[1:])]
            samples = ids.shape[0] * ctx.data_parallel
            tokens = samples * new
            ctx.step(step=step, phase=phase, repeat=repeat, step_time_s=latency, samples=samples,
                     tokens=tokens, samples_per_s=samples / latency, tokens_per_s=tokens / latency,
                     mem_bytes=adapter.memory_bytes(), new_tokens=new, ttft_s=clock.times[0] - t0,
                     per_token_s=statistics.fmean(gaps) if gaps else None)
            if phase == "measure":
                latencies.append(latency)
            sample = out[0, -new:].tolist()
    ctx.phase("done")
    return step, {"new_tokens": n_new, "sample_ids": sample[:20] if sample else [],
                  "sample_text": tok.decode(sample) if sample else "",
                  "mean_latency_s": statistics.fmean(latencies) if latencies else None,
                  **optimize.split_compiles(adapter.compile_stats(), at_measure)}


def run_infer(ctx: RunContext) -> tuple[int, dict]:
    """Forward passes only, ``micro_batch`` samples each (LM, BERT, T5, ViT)."""
    from accelctl.worker.flops import counter as flops_counter

    job, adapter = ctx.job, ctx.adapter
    built = prepare(ctx)
    models.check_positions(job, built)
    batches = data.training_batches(job, built, ctx.rank, ctx.world, ctx.log)
    ctx.started({**built.details(), **batches.details, "tokens_per_sample": batches.tokens_per_sample})
    dtype = ctx.precision.dtype if ctx.precision.name != "fp8" else None

    def forward(batch):
        if built.kind == models.IMAGE_CLASSIFIER:
            x = batch["pixel_values"]
            return built.model(x.to(dtype) if dtype is not None else x)
        if built.kind != models.SEQ2SEQ:  # no loss: the forward pass alone
            batch = {k: v for k, v in batch.items() if k != "labels"}
        return built.model(**batch)

    step, flops = 0, None
    for phase, repeat, count in schedule(job):
        ctx.phase(phase, repeat)
        for _ in range(count):
            step += 1
            batch = {k: v.to(adapter.device) for k, v in next(batches).items()}
            counting = flops is None  # FLOPs counted on the first call (warm-up when there is one)
            with flops_counter() if counting else contextlib.nullcontext() as counter:
                adapter.sync()
                t0 = time.perf_counter()
                with torch.inference_mode():
                    forward(batch)
                adapter.mark_step()
                adapter.sync()
                dt = time.perf_counter() - t0
            if counting:
                flops = counter.get_total_flops()
            samples = job.batch.micro * ctx.data_parallel
            tokens = samples * batches.tokens_per_sample
            ctx.step(step=step, phase=phase, repeat=repeat, step_time_s=dt, samples=samples, tokens=tokens,
                     samples_per_s=samples / dt, tokens_per_s=tokens / dt if tokens else None,
                     mfu=ctx.mfu(flops, dt),
                     mem_bytes=adapter.memory_bytes())
    ctx.phase("done")
    return step, {"flops_per_step": flops, **adapter.compile_stats()}

"""The training loop (pretrain / finetune), top to bottom.

One *step* is one optimizer step: ``accumulation`` micro-batches of ``micro_batch`` samples
on each of ``world`` ranks.  Warm-up steps run first and are excluded from the measured
figures; then ``repeat`` x ``steps`` measured steps.  Each step emits one StepMetrics.
"""

from __future__ import annotations

import contextlib
import math
import time

import torch
import torch.nn.functional as F

from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.worker import data, float8, models, optimize, te_layers
from accelctl.worker.checkpoint import Checkpointer, CountedBatches
from accelctl.worker.context import NonFiniteLoss, RunContext


def run(ctx: RunContext) -> tuple[int, dict]:
    job, adapter, prec = ctx.job, ctx.adapter, ctx.precision
    accum, world = job.batch.accumulation, ctx.world

    # 1. model and optimizer --------------------------------------------------------------
    t0 = time.perf_counter()
    built = models.build(job, ctx.log, device=adapter.random_init_device())  # random weights: on a GPU itself
    models.check_positions(job, built)
    model = built.model
    if job.gradient_checkpointing:
        # recompute activations in backward: less memory, ~1/3 more compute per step
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x
            model.activation_checkpointing_enable({"use_reentrant": False})
        elif hasattr(model, "gradient_checkpointing_enable"):  # older transformers
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:  # timm
            model.set_grad_checkpointing(True)
    te = te_layers.load()
    if te is not None and te["layer"]["class"] == "Linear":  # te_fp8 on llama-class: te.Linear projections
        model = te_layers.swap_linears(model, te, ctx.log)
    model = adapter.prepare_training(model.to(adapter.device).train())
    if float8.wanted(job):  # precision fp8 { library = torchao }: Float8Linear, before compile and DDP
        model = float8.convert(model, job, DEVICE_FAMILIES[job.device.adapter].host, ctx.log)
    model = optimize.apply(model, job, ctx.log)  # channels-last, torch.compile (in place, before DDP)
    model = ctx.strategy.prepare_training(model, ctx)  # DDP for several plain ranks
    fp8_after_step = float8.after_optimizer_step(job)  # FSDP2 with FP8 all-gather: the next weight scales
    optimizer = adapter.make_optimizer(job.optimizer, model.parameters())
    read = data.training_batches(job, built, ctx.data_rank, ctx.data_parallel, ctx.log)
    batches = CountedBatches(adapter.wrap_batches(read, job))  # counted: the data position of a checkpoint
    ctx.setup_s["build_s"] = time.perf_counter() - t0
    # DeepSpeed: its engine owns data parallelism, ZeRO, accumulation, clipping
    ds = ctx.strategy.training_engine(model, optimizer, ctx, batches, built.kind)

    # 2. precision: autocast around forward (fp32 master weights); fp16 adds loss scaling
    scaler = prec.grad_scaler(adapter)
    ctx.started({**built.details(), **read.details, "data": batches.source, "seq_len": job.data.seq_len,
                 "tokens_per_sample": batches.tokens_per_sample,
                 "gradient_checkpointing": job.gradient_checkpointing, "optimizer": job.optimizer.name})
    nan_at = job.debug.inject_nan_at_step  # test hook: poison the loss at that step (0: never)
    checksums = job.debug.report_param_checksum  # test hook: prove DDP syncs
    start_checksum = param_checksum(model) if checksums else None
    data_checksum = 0.0
    # checkpoints: a complete one of this run in its folder (accelctl run --resume) is loaded
    # now -- weights, optimizer, RNG, data position, measurement -- and the loop goes on after it
    ckpt = Checkpointer(ctx, model, optimizer, scaler, ds, batches)
    saved = ckpt.resume()
    resumed_at = saved["step"] if saved else 0
    if saved and checksums:
        start_checksum, data_checksum = saved["param_checksum_start"], saved["data_checksum"]

    # 3. one optimizer step: accumulation micro-batches, then clip and step ----------------
    shapes: dict[str, tuple] = {}  # the last step's batch shapes (a recompilation's usual cause)

    def train_step(step: int) -> float:
        if ds is not None:
            return ds.train_step(step)
        nonlocal data_checksum
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=adapter.device)
        for micro in range(accum):
            batch = {k: v.to(adapter.device, non_blocking=True) for k, v in next(batches).items()}
            shapes.update((k, tuple(v.shape)) for k, v in batch.items())
            if checksums:
                data_checksum += sum(float(v.double().sum()) for v in batch.values())
            # DDP: all-reduce gradients only on the last micro-batch of the step
            last = micro == accum - 1
            no_sync = model.no_sync() if hasattr(model, "no_sync") and not last else contextlib.nullcontext()
            with no_sync:
                with prec.autocast(adapter):
                    loss = forward_loss(model, built.kind, batch)
                if step == nan_at:
                    loss = loss * float("nan")
                scaled = loss / accum
                (scaler.scale(scaled) if scaler else scaled).backward()
            adapter.mark_step()
            loss_sum += loss.detach().float()
        ctx.strategy.reduce_gradients(model, ctx)  # replicas the wrapper does not reduce (TP over dp)
        loss_mean = loss_sum / accum
        if world > 1:
            # hidden cost: one scalar all-reduce per step, so every rank logs the global
            # loss and all ranks see a NaN at the same step (and stop together)
            torch.distributed.all_reduce(loss_mean)
            loss_mean /= world
        loss_value = float(loss_mean)  # host sync (on XLA it also cuts the graph here)
        # a NaN/inf loss stops the run here, before it reaches the weights
        if not math.isfinite(loss_value):
            raise NonFiniteLoss(step, loss_value)
        if job.optimizer.grad_clip > 0:
            if scaler:
                scaler.unscale_(optimizer)
            ctx.strategy.clip_grad_norm(model, job.optimizer.grad_clip, adapter)
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            adapter.optimizer_step(optimizer)
        if fp8_after_step is not None:
            fp8_after_step(model)
        adapter.mark_step()
        return loss_value

    # 4. the FLOPs of one step, counted once (matmul/conv/attention ops, forward and
    # backward, all micro-batches; with gradient checkpointing the recomputed forward is
    # included, so it is hardware FLOPs).  Counted on the first warm-up step, or, with no
    # warm-up, on an untimed forward+backward probe whose gradients are thrown away.
    from accelctl.worker.flops import counter as flops_counter

    flops = saved["flops"] if saved else None
    if job.measure.warmup == 0 and ds is None and not saved:
        with flops_counter() as counter:
            for _ in range(accum):
                batch = {k: v.to(adapter.device) for k, v in next(batches).items()}
                with prec.autocast(adapter):
                    forward_loss(model, built.kind, batch).backward()
        optimizer.zero_grad(set_to_none=True)
        flops = counter.get_total_flops()

    # 5. warm-up (excluded), then repeat x steps measured ----------------------------------
    schedule = [("warmup", 0, job.measure.warmup)]
    schedule += [("measure", r, job.measure.steps) for r in range(job.measure.repeat)]
    samples = job.batch.micro * accum * ctx.data_parallel  # global samples per optimizer step
    step, losses = 0, list(saved["losses"]) if saved else []
    compiles = CompileWatch(ctx)
    adapter.reset_peak_memory()
    for phase, repeat, count in schedule:
        if step + count <= resumed_at:  # done before the checkpoint
            step += count
            continue
        ctx.phase(phase, repeat)
        if phase == "measure" and repeat == 0:
            compiles.measured_from_here()
        for _ in range(count):
            step += 1
            if step <= resumed_at:
                continue
            # FlopCounterMode's module hooks break a pipeline stage's autograd.grad (its backward
            # shape inference): such an engine says so and its run reports no MFU
            counting = flops is None and getattr(ds, "counts_flops", True)
            with flops_counter() if counting else contextlib.nullcontext() as counter:
                adapter.sync()
                t_start = time.perf_counter()
                loss = train_step(step)
                adapter.sync()
                dt = time.perf_counter() - t_start
            if counting:
                flops = counter.get_total_flops()
            losses.append(loss)
            compiles.after_step(step, phase, shapes)

            # 6. derived quantities, once per step
            tokens = samples * batches.tokens_per_sample
            ctx.step(step=step, phase=phase, repeat=repeat, step_time_s=dt, loss=loss, samples=samples,
                     tokens=tokens, samples_per_s=samples / dt, tokens_per_s=tokens / dt if tokens else None,
                     mfu=ctx.mfu(flops, dt), mem_bytes=adapter.memory_bytes())
            if ckpt.due(step):  # outside the timed step
                ckpt.save(step, {"step": step, "losses": losses, "flops": flops,
                                 "param_checksum_start": start_checksum, "data_checksum": data_checksum})

    ctx.phase("done")
    results = {"first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None,
               "flops_per_step": flops, "samples_per_step": samples}
    if checksums:  # equal on all ranks iff gradients were all-reduced; data differs per rank
        results.update(param_checksum_start=start_checksum, param_checksum=param_checksum(model),
                       data_checksum=data_checksum)
    results.update(compiles.results())
    return step, results


class CompileWatch:
    """Graph compilations (XLA, HPU graphs) split into the warm-up's and the measured phase's.

    Compilation belongs to warm-up; one after it is a recompilation (usually a changed shape, such as
    a ragged batch) inside a measured step, warned with its cause.  Eager devices compile nothing.
    """

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.last = ctx.adapter.compile_stats()
        self.at_measure: dict | None = None
        self.shapes_seen: dict[str, set] = {}
        self.prev_shapes: dict[str, tuple] = {}

    def measured_from_here(self) -> None:
        self.at_measure = self.ctx.adapter.compile_stats()

    def after_step(self, step: int, phase: str, shapes: dict[str, tuple]) -> None:
        now = self.ctx.adapter.compile_stats()
        new = now.get("compiles", 0) - self.last.get("compiles", 0)
        changed = [f"{k} {tuple(self.prev_shapes[k])} -> {v}" for k, v in shapes.items()
                   if k in self.prev_shapes and v not in self.shapes_seen.get(k, ())]
        if new > 0 and phase == "measure":
            seconds = now.get("compile_s", 0.0) - self.last.get("compile_s", 0.0)
            cause = ("batch shape changed: " + ", ".join(changed) + " (a ragged last batch? keep shapes fixed)"
                     if changed else "no batch shape changed; a graph differs (run with PT_XLA_DEBUG_LEVEL=1 "
                     "for torch-xla's compilation analysis, TORCH_LOGS=recompiles for torch.compile's)")
            self.ctx.log("warning", f"recompilation in the measured phase at step {step}: {new} new graph(s), "
                                    f"{seconds:.1f} s compiling inside the step; cause: {cause}")
        for k, v in shapes.items():
            self.shapes_seen.setdefault(k, set()).add(v)
        self.prev_shapes = dict(shapes)
        self.last = now

    def results(self) -> dict:
        """The adapter's totals, plus the part after warm-up (``recompiles``), where it compiles."""
        total = self.ctx.adapter.compile_stats()
        if not total or self.at_measure is None:
            return total
        measured = total["compiles"] - self.at_measure["compiles"]
        return {**total, "warmup_compiles": self.at_measure["compiles"],
                "warmup_compile_s": self.at_measure["compile_s"], "recompiles": measured,
                "recompile_s": total["compile_s"] - self.at_measure["compile_s"]}


def forward_loss(model, kind: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The task's loss: HF models compute it from ``labels``; images use cross-entropy."""
    if kind == models.IMAGE_CLASSIFIER:
        return F.cross_entropy(model(batch["pixel_values"]), batch["labels"])
    return model(**batch).loss


def param_checksum(model) -> float:
    """Sum of all parameters in float64: equal on every rank iff DDP kept them in sync."""
    module = getattr(model, "module", model)
    with torch.no_grad():
        return float(sum(p.detach().double().sum() for p in module.parameters()))

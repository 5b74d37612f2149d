"""Spec + target -> WorkerJob: everything the launched loop needs, resolved."""

from __future__ import annotations

from pathlib import Path

from accelctl.contract.job import DataJob, MeasureJob, ModelJob, OptimizerJob, PrecisionJob, TaskJob, WorkerJob
from accelctl.hostinfo import cpu_count
from accelctl.spec.catalog import INSTANCES
from accelctl.spec.models import objective_for
from accelctl.spec.types import TargetSpec, WorkloadSpec


def threads_per_process(target: TargetSpec, processes: int) -> int:
    """Intra-op threads per process: the target's ``threads``, else the cores shared out.

    The cores are this machine's for a cpu target and the instance's vCPUs for a catalogued
    instance; for another machine of unknown size, 1 (torchrun's own default).
    Oversubscribing cores (more threads than cores over all ranks) made steps 6-9x
    slower on the 2-core lab machine, so ranks never share a core.
    """
    if "threads" in target.options:
        return int(target.options["threads"])
    inst = INSTANCES.get(target.instance)
    if target.device == "cpu":
        cores = cpu_count()
    elif inst is not None and inst.vcpus:
        cores = inst.vcpus
    else:
        return 1
    return max(1, cores // max(1, processes))


def build_job(spec: WorkloadSpec, target: TargetSpec, backend: str, threads: int, run_id: str = "") -> WorkerJob:
    t, m, d = spec.task, spec.model, spec.dataset
    base = Path(spec.path).resolve().parent if spec.path and spec.path != "<input>" else Path.cwd()
    data_ref = str((base / d.ref).expanduser()) if d.kind == "files" else d.ref
    fallback = str((base / d.fallback).expanduser()) if d.fallback != "synthetic" else d.fallback
    model_ref = str((base / m.ref).expanduser()) if m.source == "local" else m.ref
    objective = objective_for(m.family, t.objective)
    prec = target.precision
    fp8 = {}
    if prec.fp8 is not None:
        fp8 = {"format": prec.fp8.format, "amax_history": prec.fp8.amax_history,
               "amax_algo": prec.fp8.amax_algo, "margin": prec.fp8.margin}
    options = dict(target.options)
    options.setdefault("objective", objective)
    p = target.parallel
    options.update({"parallel": p.strategy, "tp": p.tp, "pp": p.pp, "zero_stage": p.zero_stage,
                    "kernel_inject": p.kernel_inject})
    return WorkerJob(
        run_id=run_id,
        workload=spec.name,
        target=target.name,
        backend=backend,
        device=target.device,
        task=TaskJob(kind=t.kind, prompt=t.prompt, max_new_tokens=t.max_new_tokens, decoding=t.decoding,
                     kv_cache=t.kv_cache, inference_steps=t.inference_steps or 0, guidance_scale=t.guidance_scale),
        model=ModelJob(family=m.family, source=m.source, ref=model_ref, config=dict(m.stand_in),
                       weights=str(target.options.get("weights", m.weights))),
        data=DataJob(kind=d.kind, ref=data_ref, fallback=fallback, seq_len=d.seq_len, target_len=d.target_len,
                     image_size=d.image_size, channels=d.channels, classes=d.classes, column=d.column,
                     prompt_tokens=d.prompt_tokens, mlm_probability=d.mlm_probability),
        precision=PrecisionJob(dtype=prec.dtype, fp8=fp8),
        optimizer=OptimizerJob(name=spec.optimizer.name, lr=spec.optimizer.lr,
                               weight_decay=spec.optimizer.weight_decay, momentum=spec.optimizer.momentum,
                               grad_clip=spec.optimizer.grad_clip),
        measure=MeasureJob(warmup=spec.measure.warmup, steps=spec.measure.steps, repeat=spec.measure.repeat),
        micro_batch=target.batch.micro,
        accumulation=target.batch.accumulation,
        gradient_checkpointing=target.gradient_checkpointing,
        seed=spec.seed,
        threads=threads,
        options=options,
    )

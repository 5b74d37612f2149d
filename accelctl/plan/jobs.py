"""Spec + target -> WorkerJob: everything the launched loop needs, resolved."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from accelctl.families import FAMILIES
from accelctl.contract.job import DeviceJob, WorkerJob
from accelctl.contract import hostfacts
from accelctl.models.activations import hpu_lazy
from accelctl.catalog import DEVICES, INSTANCES
from accelctl.models.catalog import objective_for
from accelctl.workload.options import OPTIONS
from accelctl.workload.types import ModelSpec, TargetSpec, WorkloadSpec
from accelctl.frozen import replace


def threads_per_process(target: TargetSpec, processes: int) -> int:
    """Intra-op threads per process: the target's ``threads``, else the cores shared out (this
    machine's for a cpu target, a catalogued instance's vCPUs, else 1 as torchrun).  Ranks never
    share a core: oversubscribing made steps several times slower.
    """
    if target.options.threads is not None:
        return target.options.threads
    inst = INSTANCES.get(target.instance)
    if DEVICES[target.device].host:
        cores = hostfacts.current().cores
    elif inst is not None and inst.vcpus:
        cores = inst.vcpus
    else:
        return 1
    return max(1, cores // max(1, processes))


def model_to_build(model: ModelSpec, host: bool) -> tuple[dict[str, Any], str]:
    """The architecture a target's worker builds, and its scale ("real" or "stand_in"): every
    accelerator target builds the real architecture (the Hub config when the catalog does not know
    the model); only the host -- a cpu target or a rehearsal -- runs the stand-in, and says so.
    """
    if not host:
        return dict(model.real_shape), "real"
    same = bool(model.real_shape) and all(model.real_shape.get(k, v) == v for k, v in model.stand_in.items())
    return dict(model.stand_in), "real" if same else "stand_in"


def initial_weights(task_kind: str, weights: str) -> str:
    """What a target's model starts from: a pre-training task starts from the model's
    configuration with random weights (``auto`` -> ``random``), never from the Hub's trained
    weights; only ``weights = real`` written out (continued pre-training) loads them."""
    return "random" if task_kind == "pretrain" and weights == "auto" else weights


def build_job(spec: WorkloadSpec, target: TargetSpec, backend: str, threads: int, strategy: str = "plain",
              run_id: str = "", rehearsal_of: str = "") -> WorkerJob:
    """The job of one target: the spec's own types resolved for it (paths absolute, the
    target's precision, batch, parallel layout and options, the task's objective)."""
    t, m, d = spec.task, spec.model, spec.dataset
    # the workload's own folder (os.path.realpath: Path.resolve without its second stat, once a target)
    base = Path(os.path.dirname(os.path.realpath(spec.path))) if spec.path and spec.path != "<input>" else Path.cwd()
    # a dataset's fallback is for runs on the host CPU; real devices run the real data or fail
    fallback = d.fallback if DEVICES[target.device].host else ""
    data = replace(d, ref=str((base / d.ref).expanduser()) if d.kind == "files" else d.ref,
                   fallback=str((base / fallback).expanduser()) if fallback not in ("", "synthetic") else fallback)
    model = replace(m, ref=str((base / m.ref).expanduser()) if m.source == "local" else m.ref,
                    weights=initial_weights(t.kind, target.options.weights or m.weights))
    device_kind = DEVICES[target.device]
    family = FAMILIES[device_kind.adapter]
    architecture, scale = model_to_build(m, device_kind.host)
    # an option lands where its row says: a ``device.*`` field of the device settings
    device_options = {path.removeprefix("device."): v for k, v in target.options.written().items()
                      for path in OPTIONS[k].lands if path.startswith("device.")}
    if device_kind.lazy_graphs:  # lazy unless the target says off, or runs FSDP (eager on Gaudi)
        device_options["lazy_mode"] = hpu_lazy(target)
    device = DeviceJob(kind=target.device, adapter=family.name, comm=family.comm, **device_options)
    # a checkpoint dir is relative to the workload's folder, like its data and model paths
    cp = spec.checkpoint
    checkpoint = replace(cp, dir=str(base / Path(cp.dir).expanduser()) if cp.dir else "")
    return WorkerJob(
        run_id=run_id,
        workload=spec.name,
        target=target.name,
        backend=backend,
        device=device,
        task=replace(t, objective=objective_for(m.family, t.objective)),
        model=model,
        architecture=architecture,
        data=data,
        precision=target.precision,
        optimizer=spec.optimizer,
        measure=spec.measure,
        batch=target.batch,
        parallel=target.parallel,
        strategy=strategy,
        gradient_checkpointing=target.gradient_checkpointing,
        optimize=target.optimize,
        seed=spec.seed,
        checkpoint=checkpoint,
        scale=scale,
        rehearsal_of=rehearsal_of,
        hub=hub_access(target),
        threads=threads,
    )


def hub_access(target: TargetSpec) -> str:
    """The target's ``hub`` option, else online on an accelerator (the real weights and data
    come from the Hub there) and offline on the host (its cache and local paths only)."""
    return (target.options.hub or ("offline" if DEVICES[target.device].host else "online"))


def optimize_notes(job: WorkerJob) -> list[str]:
    """One plan note per ``optimize`` setting and static KV cache the worker will apply."""
    notes = []
    if job.optimize.compile:
        what = ("each transformer block, before FSDP2's fully_shard (torchtitan's order: the per-block all-gathers "
                "and reduce-scatters stay outside the graphs)" if job.strategy == "sharded" else "the model")
        notes.append(f"torch.compile(mode={job.optimize.compile_mode}) of {what}: compiled in the warm-up "
                     "steps (time reported as compile_s, apart from the measured steps; recompilations after "
                     "warm-up counted and warned)")
    if job.optimize.channels_last:
        notes.append("channels-last (NHWC) weights and image inputs")
    if job.task.kind == "generate" and job.task.kv_cache and job.task.kv_cache_layout == "static":
        notes.append(f"static KV cache (cache_implementation=\"static\"): pre-allocated for prompt + "
                     f"{job.task.max_new_tokens} tokens")
    return notes


def checkpoint_warnings(target: TargetSpec, job: WorkerJob) -> list[str]:
    """Plan warnings of a ``checkpoint`` block that would save nothing on this target."""
    every = job.checkpoint.every
    if not every:
        return []
    if target.options.script == "example":
        return ["checkpoint { } is ignored: this target runs the backend's example script, not accelctl's loop, "
                "so no checkpoint is saved and the run cannot be resumed"]
    total = job.measure.warmup + job.measure.steps * job.measure.repeat
    if every > total:
        return [f"checkpoint every {every} steps: this run takes {total} steps and saves no checkpoint"]
    return []

"""Spec + target -> WorkerJob: everything the launched loop needs, resolved."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from accelctl.contract.devices import FAMILIES
from accelctl.contract.job import DeviceJob, WorkerJob
from accelctl.hostinfo import cpu_count
from accelctl.spec.catalog import DEVICES, INSTANCES
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


def build_job(spec: WorkloadSpec, target: TargetSpec, backend: str, threads: int, strategy: str = "plain",
              run_id: str = "") -> WorkerJob:
    """The job of one target: the spec's own types resolved for it (paths absolute, the
    target's precision, batch, parallel layout and options, the task's objective)."""
    t, m, d = spec.task, spec.model, spec.dataset
    base = Path(spec.path).resolve().parent if spec.path and spec.path != "<input>" else Path.cwd()
    # a dataset's fallback is for runs on the host CPU; real devices run the real data or fail
    fallback = d.fallback if DEVICES[target.device].host else ""
    data = replace(d, ref=str((base / d.ref).expanduser()) if d.kind == "files" else d.ref,
                   fallback=str((base / fallback).expanduser()) if fallback not in ("", "synthetic") else fallback)
    model = replace(m, ref=str((base / m.ref).expanduser()) if m.source == "local" else m.ref,
                    weights=str(target.options.get("weights", m.weights)))
    family = FAMILIES[DEVICES[target.device].adapter]
    opts = target.options
    device = DeviceJob(kind=target.device, adapter=family.name, comm=family.comm,
                       hpu_graphs=bool(opts.get("hpu_graphs", False)), lazy_mode=bool(opts.get("lazy_mode", True)),
                       dataloader_workers=int(opts.get("dataloader_workers", 0)))
    return WorkerJob(
        run_id=run_id,
        workload=spec.name,
        target=target.name,
        backend=backend,
        device=device,
        task=replace(t, objective=objective_for(m.family, t.objective)),
        model=model,
        data=data,
        precision=target.precision,
        optimizer=spec.optimizer,
        measure=spec.measure,
        batch=target.batch,
        parallel=target.parallel,
        strategy=strategy,
        gradient_checkpointing=target.gradient_checkpointing,
        seed=spec.seed,
        threads=threads,
    )

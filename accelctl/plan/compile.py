"""plan(spec, target, engine) -> Plan: choose a backend, build the job, render launches."""

from __future__ import annotations

from accelctl.contract.plan import Plan
from accelctl.errors import Diagnostic, PlanError
from accelctl.plan import parallel_layout
from accelctl.plan.jobs import build_job, checkpoint_warnings, optimize_notes, threads_per_process
from accelctl.plan.memory import estimate
from accelctl.plan.registry import BACKENDS, ENGINES, choose
from accelctl.plan.rehearse import rehearsal_target
from accelctl.plan.select import named_target
from accelctl.plan.tracking import missing_trackers, resolve_tracking, tracking_notes
from accelctl.plan.weights import unreachable_weights, weights_note
from accelctl.spec.catalog import DEVICES
from accelctl.spec.types import EngineSpec, TargetSpec, WorkloadSpec


def _diag(spec: WorkloadSpec, target: TargetSpec, code: str, message: str, hint: str = "") -> Diagnostic:
    return Diagnostic(code, message, spec.origins.get(f"targets.{target.name}"), spec.path, hint)


def compile_plan(spec: WorkloadSpec, target: str | TargetSpec, engine: str | None = None,
                 rehearse: bool = False, fp8: bool = False, device_path: bool = False) -> Plan:
    """The plan of ``target``; with ``rehearse``, a CPU rehearsal of it (``plan.rehearse``);
    with ``fp8`` too, its FP8 rehearsal (the recipe emulated beside a baseline); with
    ``device_path`` (``accelctl run/plan --rehearse``), the rehearsal the target's backend makes
    of its own device path on this CPU (``Backend.device_rehearsal``: a Neuron target on the
    XLA CPU device), or the plain one with that backend's word on why not."""
    if isinstance(target, str):
        target = named_target(spec, target)
    if rehearse and device_path and not fp8 and not DEVICES[target.device].host:
        stand_in = compile_plan(spec, target, engine, rehearse=True)
        try:
            real = compile_plan(spec, target, engine)
        except PlanError:
            return stand_in  # the target itself does not plan (it rehearses all the same)
        return BACKENDS[real.backend].device_rehearsal(real, stand_in)
    rehearsal = None
    if rehearse and (fp8 or not DEVICES[target.device].host):
        target, rehearsal = rehearsal_target(spec, target, fp8=fp8)
    spec = spec.for_target(target)  # the target's own measure/optimizer, if it has them
    backend, refusals = choose(spec, target)
    if backend is None:
        raise PlanError(diagnostics=refusals)
    engine_name = engine or target.engine
    eng = ENGINES.get(engine_name)
    if eng is None:
        raise PlanError(diagnostics=[_diag(spec, target, "E521", f"engine {engine_name} is not available",
                                           "engines: " + ", ".join(ENGINES))])
    why = eng.unsupported(spec, target, backend.name)
    if why:
        raise PlanError(diagnostics=[_diag(spec, target, "E522", f"engine {engine_name} cannot run target "
                                           f"{target.name} ({backend.name})", "; ".join(why))])
    fit = estimate(spec, target)
    if not fit.fits:
        raise PlanError(diagnostics=[_diag(
            spec, target, "E530", f"{spec.name} does not fit on target {target.name}: {fit.describe()}",
            "shard it (parallel = zero(stage = 3) or tensor(tp = N)), turn on gradient_checkpointing, "
            "lower the micro-batch, or pick a device with more memory")])
    threads = threads_per_process(target, backend.processes_per_node(target))
    job = build_job(spec, target, backend.name, threads, backend.strategy_for(target),
                    rehearsal_of=rehearsal.of if rehearsal else "")
    missing = unreachable_weights(spec, target, job)
    if missing is not None:
        raise PlanError(diagnostics=[missing])
    built = backend.build(spec, target, job)
    built = eng.wrap(spec, target, built, job, spec.engines.get(engine_name) or EngineSpec(kind=engine_name))
    warnings = [*built.warnings, *checkpoint_warnings(target, job)]
    notes = [*built.notes, *optimize_notes(job), *filter(None, [weights_note(target, job)]), fit.describe(),
             *parallel_layout.notes(spec, target)]
    if rehearsal is not None:
        notes.insert(0, f"REHEARSAL of target {rehearsal.of} ({rehearsal.world_size} x {rehearsal.device}) on this "
                        f"CPU with the stand-in, random weights: " + ("; ".join(rehearsal.changes) or "same layout"))
    tracking = resolve_tracking(spec)
    notes += tracking_notes(tracking)
    warnings += [f"track: {m} cannot be imported here: `accelctl run` refuses to start (E594)"
                 for m in missing_trackers(tracking)]
    if DEVICES[target.device].host:
        from accelctl.contract.calibration import speed_vs_fp32
        from accelctl.hostinfo import cpu_model, cpu_precision_warning

        # the stored measurement of this CPU decides where there is one, else its flags
        dtype = target.precision.dtype
        measured = speed_vs_fp32(dtype, cpu_model(), job.threads) if dtype in ("bf16", "fp16") else None
        slow = cpu_precision_warning(dtype, measured=measured)
        if slow is not None:
            warnings.append(slow)
    return Plan(workload=spec.name, target=target.name, backend=backend.name, engine=engine_name,
                device=target.device, launches=tuple(built.launches), files=tuple(built.files), job=job,
                notes=tuple(notes), warnings=tuple(warnings), rehearsal=rehearsal, tracking=tracking)

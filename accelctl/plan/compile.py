"""plan(spec, target, engine) -> Plan: choose a backend, build the job, render launches."""

from __future__ import annotations

from accelctl.contract import hostfacts
from accelctl.contract.hostfacts import HostFacts
from accelctl.contract.plan import Plan, PlanFacts
from accelctl.errors import Diagnostic, PlanError
from accelctl.families import FAMILIES
from accelctl.plan import fixes as plan_fixes
from accelctl.plan import parallel_layout
from accelctl.plan.jobs import build_job, checkpoint_warnings, optimize_notes, threads_per_process
from accelctl.plan.memory import estimate
from accelctl.plan.positions import too_long
from accelctl.plan.registry import BACKENDS, ENGINES, choose
from accelctl.plan.stack import engine_settings, with_stack
from accelctl.plan.tracking import missing_trackers, resolve_tracking, tracking_notes
from accelctl.plan.weights import unreachable_weights, weights_note
from accelctl.catalog import DEVICES
from accelctl.language.schema import ENGINE_KEYS
from accelctl.workload.types import EngineSpec, TargetSpec, WorkloadSpec
from accelctl.frozen import replace


def _diag(spec: WorkloadSpec, target: TargetSpec, code: str, message: str, hint: str = "") -> Diagnostic:
    return Diagnostic(code, message, spec.origins.get(f"targets.{target.name}"), spec.path, hint)


def compile_plan(spec: WorkloadSpec, target: str | TargetSpec, engine: str | None = None,
                 rehearse: bool = False, fp8: bool = False, device_path: bool = False,
                 host: HostFacts | None = None, fixes: bool = True) -> Plan:
    """The plan of ``target`` compiled for the machine ``host`` describes (``contract.hostfacts``; None:
    this machine, read now): the same input gives the same plan anywhere.  ``rehearse``: a CPU
    rehearsal of it; ``fp8``: its FP8 rehearsal; ``device_path``: the rehearsal the backend makes of
    its own device path (``Backend.device_rehearsal``), or the plain one with the backend's reason.
    ``fixes``: a target that does not fit gets the fixes that plan in its refusal (``plan.fixes``:
    a few plans more; a verb that only needs the verdict of many points leaves them out).
    """
    with hostfacts.using(host or hostfacts.current()):  # a nested plan: the one being compiled's
        return _compile(spec, target, engine, rehearse, fp8, device_path, fixes)


def _compile(spec: WorkloadSpec, target: str | TargetSpec, engine: str | None, rehearse: bool, fp8: bool,
             device_path: bool, fixes: bool) -> Plan:
    if isinstance(target, str):
        from accelctl.plan.select import named_target

        target = named_target(spec, target)
    if rehearse and device_path and not fp8 and not DEVICES[target.device].host:
        real = compile_plan(spec, target, engine)  # a target plan refuses is refused here the same way
        return BACKENDS[real.backend].device_rehearsal(real, compile_plan(spec, target, engine, rehearse=True))
    rehearsal = None
    if rehearse:  # only a rehearsal's (validate's verdict plans none)
        from accelctl.plan.rehearsal_size import sized_for_this_cpu
        from accelctl.plan.rehearse import rehearsal_target
    if rehearse and fp8:
        # the FP8 rehearsal is an experiment on the recipe, not the target's plan: it runs where
        # Transformer Engine does not plan yet (a gpt2 stand-in), at the written steps its verdict needs
        target, rehearsal = rehearsal_target(spec, target, fp8=True)
    elif rehearse and not DEVICES[target.device].host:
        # a rehearsal is the target's plan, sized for this CPU: what `plan` refuses of the target
        # is refused the same way (same code, words and line), never rehearsed
        compile_plan(spec, target, engine)
        target, rehearsal = rehearsal_target(spec, target)
        spec, target, rehearsal = sized_for_this_cpu(spec, target, rehearsal)
    spec = spec.for_target(target)  # the target's own measure/optimizer, if it has them
    backend, refusals = choose(spec, target)
    if backend is None:
        raise PlanError(diagnostics=refusals)
    engine_name = engine or target.engine
    eng = ENGINES.get(engine_name)
    if eng is None:
        # at the target's `engine = ...` where it wrote one (validate reports it there too)
        hint = "engines: " + ", ".join(ENGINES)
        if engine_name in ENGINE_KEYS:  # a block the language has (`engine deepspeed { hosts = ... }`), no engine
            hint = (f"`engine {engine_name} {{ ... }}` configures the {engine_name} launcher of the targets whose "
                    f"backend starts it (deepspeed: parallel = zero(...) or deepspeed_inference(...)), under a "
                    f"target's engine; " + hint)
        raise PlanError(diagnostics=[Diagnostic("E521", f"engine {engine_name} is not available", None if engine else
                                                spec.origin_of(target.name, "engine")
                                                or spec.origins.get(f"targets.{target.name}"), spec.path, hint)])
    why = eng.unsupported(spec, target, backend.name)
    if why:
        raise PlanError(diagnostics=[_diag(spec, target, "E522", f"engine {engine_name} cannot run target "
                                           f"{target.name} ({backend.name})", "; ".join(why))])
    fit = estimate(spec, target)
    if not fit.fits:
        found = plan_fixes.fixes(spec, target, lambda s, t: compile_plan(s, t, engine, fixes=False)) if fixes else []
        diag = _diag(spec, target, "E530", f"{spec.name} does not fit on target {target.name}: {fit.describe()}",
                     plan_fixes.hint(found) if fixes else "")
        raise PlanError(diagnostics=[replace(diag, fixes=tuple(found))])
    threads = threads_per_process(target, backend.processes_per_node(target))
    job = build_job(spec, target, backend.name, threads, backend.strategy_for(target),
                    rehearsal_of=rehearsal.of if rehearsal else "")
    missing = unreachable_weights(spec, target, job) or too_long(spec, target, job)
    if missing is not None:
        raise PlanError(diagnostics=[missing])
    built = backend.build(spec, target, job)
    settings = engine_settings(target, engine_name, spec.engines.get(engine_name) or EngineSpec(kind=engine_name))
    built = with_stack(spec, target, engine_name, settings, eng.wrap(spec, target, built, job, settings))
    warnings = [*built.warnings, *checkpoint_warnings(target, job)]
    notes = [*built.notes, *optimize_notes(job), *filter(None, [weights_note(target, job)]), fit.describe()]
    not_run_here = FAMILIES[DEVICES[target.device].adapter].not_run
    if not_run_here:
        notes.append(f"NOT RUN here: {not_run_here}")
    if job.strategy == parallel_layout.WORKER_STRATEGY:  # the worker's DeviceMesh (a vendor stack says its own)
        notes += parallel_layout.notes(spec, target)
    if rehearsal is not None:
        notes.insert(0, f"REHEARSAL of target {rehearsal.of} ({rehearsal.world_size} x {rehearsal.device}) on this "
                        f"CPU with the stand-in, random weights: " + ("; ".join(rehearsal.changes) or "same layout"))
    tracking = resolve_tracking(spec)
    notes += tracking_notes(tracking)
    warnings += [f"track: {m} cannot be imported here: `accelctl run` refuses to start (E594)"
                 for m in missing_trackers(tracking)]
    if DEVICES[target.device].host:
        # the stored measurement of the host's CPU decides where there is one, else its flags
        slow = hostfacts.current().precision_warning(target.precision.dtype, job.threads)
        if slow is not None:
            warnings.append(slow)
    plan = Plan(workload=spec.name, target=target.name, backend=backend.name, engine=engine_name,
                device=target.device, launches=tuple(built.launches), files=tuple(built.files), job=job,
                notes=tuple(notes), warnings=tuple(warnings), rehearsal=rehearsal, tracking=tracking,
                request=built.request, facts=PlanFacts(fit.params, fit.terms(), fit.fits, fit.basis))
    bad = plan.unwritable()
    if bad is not None:  # the check pass refuses every such value at its line: this is the second line
        raise PlanError(diagnostics=[_diag(spec, target, "E218", f"target {target.name}: {bad}",
                                           "a value that reaches a command line or a generated file is "
                                           "one word without control characters")])
    return plan


"""plan(spec, target, engine) -> Plan: choose a backend, build the job, render launches."""

from __future__ import annotations

from accelctl.errors import Diagnostic, PlanError
from accelctl.plan.jobs import build_job, threads_per_process
from accelctl.plan.model import Plan
from accelctl.plan.registry import choose
from accelctl.spec.types import TargetSpec, WorkloadSpec


def _diag(spec: WorkloadSpec, target: TargetSpec, code: str, message: str, hint: str = "") -> Diagnostic:
    return Diagnostic(code, message, spec.origins.get(f"targets.{target.name}"), spec.path, hint)


def compile_plan(spec: WorkloadSpec, target: str | TargetSpec, engine: str | None = None) -> Plan:
    if isinstance(target, str):
        try:
            target = spec.target(target)
        except KeyError:
            names = ", ".join(t.name for t in spec.targets)
            raise PlanError(f"workload {spec.name} has no target '{target}' (targets: {names})") from None
    backend, why = choose(spec, target)
    if backend is None:
        raise PlanError(diagnostics=[_diag(spec, target, "E520", f"no backend can run target {target.name}",
                                           "; ".join(why))])
    engine_name = engine or target.engine
    if engine_name != "local":
        raise PlanError(diagnostics=[_diag(spec, target, "E521", f"engine {engine_name} is not available yet",
                                           "use engine = local")])
    threads = threads_per_process(target, backend.processes_per_node(target))
    job = build_job(spec, target, backend.name, threads)
    built = backend.build(spec, target, job)
    warnings = list(built.warnings)
    if target.device == "cpu" and target.precision.dtype in ("bf16", "fp16"):
        from accelctl.run.envinfo import cpu_has_native_bf16

        if not cpu_has_native_bf16():
            warnings.append(f"{target.precision.dtype} on this CPU: it has no native bf16/fp16 arithmetic "
                            "(AVX2 only), so it runs ~100-180x slower than fp32; use precision = fp32 on cpu targets")
    return Plan(workload=spec.name, target=target.name, backend=backend.name, engine=engine_name,
                device=target.device, launches=tuple(built.launches), files=tuple(built.files), job=job,
                notes=tuple(built.notes), warnings=tuple(warnings))

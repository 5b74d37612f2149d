"""Helpers for the backend tests: plan a target with a given backend object.

``plan_with`` does what ``accelctl.plan.compile.compile_plan`` does once a backend is in the
registry (job, threads, build -> Plan), so these tests pass before and after the backends are
registered; ``test_*_registry`` checks that the registry, once it lists them, agrees.
"""

from __future__ import annotations

from accelctl.api import check, parse
from accelctl.contract.plan import Plan
from accelctl.plan.jobs import build_job, threads_per_process


def plan_with(backend, spec, target_name: str) -> Plan:
    target = spec.target(target_name)
    why = backend.unsupported(spec, target)
    if why:
        raise ValueError("; ".join(d.hint for d in why))
    threads = threads_per_process(target, backend.processes_per_node(target))
    job = build_job(spec, target, backend.name, threads, backend.worker_strategy)
    built = backend.build(spec, target, job)
    return Plan(workload=spec.name, target=target.name, backend=backend.name, engine=target.engine,
                device=target.device, launches=tuple(built.launches), files=tuple(built.files), job=job,
                notes=tuple(built.notes), warnings=tuple(built.warnings))


def load_spec(text: str, name: str = "seed.wl"):
    (spec,) = check(parse(text, name))
    return spec

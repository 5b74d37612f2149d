"""``accelctl plan --check``: a plan checked by the real software it targets.

Each backend owns its check (``Backend.check``, beside the backend in its package): torch's
torchrun parser, DeepSpeed's own config classes and launcher parser, Transformer Engine's
source, torch-xla's API table, optimum-habana in its own venv.  A tool that is not installed
gives a "not run" result (``ok is None``) with how to get it, never a pass; ``accelctl plan
--check`` exits 3 on one unless ``--allow-unavailable``.  Engines past one machine
check their submission the same way (``Engine.check``: AWS Batch requests against
botocore's service model).  This module only asks the plan's backend and engine.
"""

from __future__ import annotations

from accelctl.backends.findings import CheckResult, not_run
from accelctl.contract.plan import Plan
from accelctl.families import FAMILIES
from accelctl.plan.registry import BACKENDS, ENGINES
from accelctl.plan.stack import unchecked
from accelctl.catalog import DEVICES
from accelctl.workload.types import WorkloadSpec

__all__ = ["CheckResult", "check_plan"]


def check_plan(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    """Every check of ``plan``'s backend and engine (``[]``: neither has an external tool to ask)."""
    backend, engine = BACKENDS.get(plan.backend), ENGINES.get(plan.engine)
    spec = spec.for_target(spec.target(plan.target))
    node = engine.node_plan(plan) if engine else plan
    results = [*(backend.check(node, spec) if backend else []), *(engine.check(plan, spec) if engine else [])]
    family = FAMILIES[DEVICES[plan.device].adapter] if plan.device in DEVICES else None
    if family is not None and family.not_run:  # what its row says no check here can run
        results.append(not_run(f"{family.stack}: its runtime", family.not_run))
    return results + unchecked(spec.target(plan.target), results)

"""``accelctl plan --check``: a plan checked by the real software it targets.

Each backend owns its check (``Backend.check``, beside the backend in its package): torch's
torchrun parser, DeepSpeed's own config classes and launcher parser, Transformer Engine's
source, torch-xla's API table, optimum-habana in its own venv.  A tool that is not installed
gives a "not run" result (``ok is None``) with how to get it, never a pass; ``accelctl plan
--check`` exits 3 on one unless ``--allow-unavailable``.  This module only asks the
plan's backend.
"""

from __future__ import annotations

from accelctl.backends.findings import CheckResult
from accelctl.contract.plan import Plan
from accelctl.plan.registry import BACKENDS
from accelctl.spec.types import WorkloadSpec

__all__ = ["CheckResult", "check_plan"]


def check_plan(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    """Every check of ``plan``'s backend (``[]``: it has no external tool to ask)."""
    backend = BACKENDS.get(plan.backend)
    if backend is None:
        return []
    return backend.check(plan, spec.for_target(spec.target(plan.target)))

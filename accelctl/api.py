"""The public surface: parse -> check -> plan -> launch, one function per arrow.

Everything here is importable without torch; ``launch`` starts processes (through
the runner) and is the only function with side effects beyond reading files.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.dsl.ast import File
from accelctl.dsl.parser import parse, parse_file
from accelctl.errors import AccelctlError, Diagnostic, PlanError, RunError, WorkloadError
from accelctl.spec.check import check, check_all
from accelctl.spec.types import TargetSpec, WorkloadSpec

__all__ = [
    "AccelctlError", "Diagnostic", "File", "PlanError", "RunError", "TargetSpec", "WorkloadError", "WorkloadSpec",
    "check", "check_all", "launch", "load", "parse", "parse_file", "plan",
]


def load(path: str | Path) -> tuple[WorkloadSpec, ...]:
    """Parse and check a workload file; raises ``WorkloadError`` with every diagnostic."""
    return check(parse_file(path))


def plan(spec: WorkloadSpec, target: str | TargetSpec, engine: str | None = None):
    """Compile one target of a spec into an inert ``Plan``."""
    from accelctl.plan.compile import compile_plan

    return compile_plan(spec, target, engine)


def launch(plan_, **kwargs):
    """Run a plan for real; returns a ``RunHandle`` streaming events."""
    from accelctl.run.runner import launch as _launch

    return _launch(plan_, **kwargs)

"""One verdict from ``validate`` to the rented machine: what ``plan`` would refuse
of a valid workload, reported by ``validate`` at the same line, with the same code and words.

``validate`` checks the language (``accelctl.language.check``); a valid workload can still name
a target no backend or engine plans (an engine that is not built, a strategy its device
family does not run, a model that does not fit ...).  ``plan_refusals`` plans every target of a spec the
way ``accelctl plan`` does and returns each refusal as a warning: the workload is valid and
its other targets plan, but that target is refused before anything is launched, and
``validate`` says so now rather than ``plan`` later.  Planning imports no torch.
"""

from __future__ import annotations


from accelctl.errors import Diagnostic, PlanError
from accelctl.workload.types import WorkloadSpec
from accelctl.frozen import replace

#: how validate marks a target that plan refuses (the diagnostic keeps plan's code and words)
SEVERITY = "warning"


def plan_refusals(spec: WorkloadSpec, host=None) -> list[Diagnostic]:
    """Every target of ``spec`` planned as ``accelctl plan`` plans it (for ``host``, a
    ``HostFacts``; None: this machine); the refusals, as warnings (plan's code, message, span
    and hint), in target order."""
    from accelctl.plan.compile import compile_plan

    out: list[Diagnostic] = []
    for target in spec.targets:
        try:
            compile_plan(spec, target, host=host)
        except PlanError as exc:
            out += [replace(d, severity=SEVERITY) for d in exc.diagnostics]
    return out

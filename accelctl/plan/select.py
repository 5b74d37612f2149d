"""Which workloads of a file, and which target of a workload: the one selection rule.

* ``select_workloads(specs, path, name)``: the named workload, or every one;
* ``named_target(spec, name)``: the target called ``name``, or a ``PlanError`` naming the
  targets there are;
* ``pick_target(spec, name)``: the named target, else the first target whose device is
  present on this machine (``accelctl.contract.devices.present_adapters``), else the host (``cpu``)
  target — with a sentence saying why.

``accelctl plan``/``run``, ``accelctl sweep``, the planner and the TUI's live run all
choose through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from accelctl.errors import AccelctlError, Diagnostic, PlanError, Span, WorkloadError, attach_source, did_you_mean
from accelctl.contract.devices import present_adapters
from accelctl.spec.catalog import DEVICES
from accelctl.spec.types import TargetSpec, WorkloadSpec


def select_workloads(specs: Iterable[WorkloadSpec], path: str, name: str | None = None) -> list[WorkloadSpec]:
    """The workload called ``name`` (a one-item list), or every workload when ``name`` is None."""
    specs = list(specs)
    if not name:
        return specs
    chosen = [s for s in specs if s.name == name]
    if not chosen:
        message = f"{path} has no workload '{name}' (workloads: {', '.join(s.name for s in specs)})"
        raise AccelctlError(message, [Diagnostic("E598", message, path=str(path),
                                                 hint=did_you_mean(name, (s.name for s in specs)))])
    return chosen


def named_target(spec: WorkloadSpec, name: str) -> TargetSpec:
    """The target called ``name``; a ``PlanError`` listing the targets when there is none."""
    try:
        return spec.target(name)
    except KeyError:
        names = ", ".join(t.name for t in spec.targets)
        message = f"workload {spec.name} has no target '{name}' (targets: {names})"
        # positioned at the workload's first target: where the targets are written
        block = spec.origins.get(f"targets.{spec.targets[0].name}") if spec.targets else None
        first = Span.point(block.line, block.column, len("target")) if block else None
        diag = Diagnostic("E597", message, first, spec.path, hint=did_you_mean(name, (t.name for t in spec.targets)))
        raise PlanError(message, _with_source(diag)) from None


def _with_source(diag: Diagnostic) -> list[Diagnostic]:
    """``diag`` with its source line, when its file can still be read."""
    from accelctl.dsl.source import read_source

    try:
        return attach_source([diag], read_source(diag.path))
    except WorkloadError:
        return [diag]


def pick_target(spec: WorkloadSpec, name: str | None = None,
                present: Mapping[str, str] | None = None) -> tuple[TargetSpec, str]:
    """The target to run and why: the named one, else the first whose device is here, else cpu.

    ``present`` is the machine's device adapters -> how they were found (default:
    ``present_adapters()`` of this machine).
    """
    if name:
        return named_target(spec, name), f"--target {name}"
    if present is None:
        present = present_adapters()
    for t in spec.targets:
        adapter = DEVICES[t.device].adapter
        if not DEVICES[t.device].host and adapter in present:
            return t, f"first target whose device is present here ({adapter}: {present[adapter]})"
    for t in spec.targets:
        if DEVICES[t.device].host:
            others = [x.name for x in spec.targets if not DEVICES[x.device].host]
            why = "no accelerator found on this machine"
            return t, why + (f" for targets {', '.join(others)}" if others else "") + "; using the cpu target"
    raise PlanError(f"no target of workload {spec.name} can run on this machine (no accelerator found) and it has "
                    "no cpu target; add 'target cpu { devices = 1 }' or pass --target")


def pick_rehearsal(spec: WorkloadSpec) -> tuple[TargetSpec, str]:
    """The target ``--rehearse`` stands for when none is named: the first accelerator target."""
    for t in spec.targets:
        if not DEVICES[t.device].host:
            return t, "--rehearse: the first accelerator target"
    raise PlanError(f"workload {spec.name} has no accelerator target to rehearse; its cpu target runs as it is")

"""Which workloads of a file, and which target of a workload: the one selection rule.

* ``select_workloads(specs, path, name)``: the named workload, or every one;
* ``named_target(spec, name)``: the target called ``name``, or a ``PlanError`` naming the
  targets there are;
* ``pick_target(spec, name)``: the named target, else the first target whose device is
  present on this machine (``accelctl.families.present_adapters``), else the host (``cpu``)
  target — with a sentence saying why.

``accelctl plan``/``run``, ``accelctl sweep``, the planner and the TUI's live run all
choose through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from accelctl.errors import AccelctlError, Diagnostic, PlanError, Span, WorkloadError, attach_source, did_you_mean
from accelctl.families import present_adapters
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec


def select_workloads(specs: Iterable[WorkloadSpec], path: str, name: str | None = None) -> list[WorkloadSpec]:
    """The workload called ``name`` (a one-item list), or every workload when ``name`` is None."""
    specs = list(specs)
    if not name:
        return specs
    chosen = [s for s in specs if s.name == name]
    if not chosen:
        raise no_workload(path, name, [s.name for s in specs])
    return chosen


def no_workload(path: str, name: str, names: list[str]) -> AccelctlError:
    """E598: ``-w name`` names no workload of the file at ``path`` (its workloads: ``names``)."""
    message = f"{path} has no workload '{name}' (workloads: {', '.join(names)})"
    return AccelctlError(message, [Diagnostic("E598", message, path=str(path), hint=did_you_mean(name, names))])


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


#: engines whose launches start on this machine (the others submit to their cluster's own nodes)
ENGINES_HERE = ("local", "torchrun")


def missing_here(spec: WorkloadSpec, target: TargetSpec, engine: str | None = None,
                 present: Mapping[str, str] | None = None) -> str | None:
    """Why ``target`` cannot run on this machine, in one line -- its devices are not here and its
    engine (``engine``, else the target's) starts the launches here -- naming what is missing
    with ``accelctl doctor`` and ``--rehearse`` as the next steps; None: its devices are here
    (or the host's), or its engine runs it elsewhere.  ``present``: as ``pick_target``'s."""
    dev = DEVICES[target.device]
    if dev.host or (engine or target.engine) not in ENGINES_HERE:
        return None
    if present is None:
        present = present_adapters()
    if dev.adapter in present:
        return None
    workload = f" -w {spec.name}" if spec.path else ""
    return (f"target {target.name} needs {target.world_size} x {target.device} ({dev.adapter} devices), and this machine "
            f"has no {dev.adapter} device (found: {', '.join(sorted(present)) or 'none'}): `accelctl doctor` says what "
            f"it can run; `accelctl run {spec.path}{workload} -t {target.name} --rehearse` rehearses the target on "
            "this CPU")


def runs_here(spec: WorkloadSpec, target: TargetSpec, present: Mapping[str, str] | None = None) -> bool:
    """Whether ``target`` runs on this machine as it is: the host, or a device present here, under
    an engine that starts its launches here (the TUI's default selection)."""
    dev = DEVICES[target.device]
    if target.engine not in ENGINES_HERE:
        return False
    return dev.host or missing_here(spec, target, present=present) is None

"""The public surface: parse -> check -> plan -> launch, one function per arrow, and what
the faces (``accelctl.cli``, ``accelctl.tui``) share: which workloads and target to take
(``select_workloads``, ``pick_target``), a plan as text (``render_plan*``) and the diff of
two plans (``plan_diff``, ``diff_texts``).

Everything here is importable without torch; ``launch`` starts processes (through
the runner) and is the only function with side effects beyond reading files.  What only
planning needs (``accelctl.plan.render``, ``accelctl.plan.select`` and the plan contract
under them) loads on first use of one of its names (``__getattr__``), so ``validate``
imports the parser and the checker only.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.dsl.ast import File
from accelctl.dsl.parser import parse, parse_file, read_source
from accelctl.errors import AccelctlError, Diagnostic, PlanError, RunError, Span, WorkloadError, attach_source
from accelctl.language.check import check, check_all
from accelctl.workload.types import TargetSpec, WorkloadSpec

__all__ = [
    "FORMATS", "AccelctlError", "Diagnostic", "File", "PlanError", "RunError", "TargetSpec", "WorkloadError",
    "WorkloadSpec", "check", "check_all", "check_plan", "diff_texts", "launch", "list_runs", "load",
    "load_selected", "load_selected_source", "load_source", "named_target", "one_process", "plan_refusal", "prepare_resume", "resume", "pick_rehearsal", "parse", "parse_file", "pick_target", "plan", "plan_diff", "read_source",
    "refusal_header", "render_plan", "render_plan_sh", "render_plan_text", "select_workloads", "validate",
    "validate_text",
]


#: names served from the planning modules, imported on first use (PEP 562)
_LAZY = {
    **dict.fromkeys(("FORMATS", "diff_texts", "plan_diff", "refusal_header", "render_plan", "render_plan_sh",
                     "render_plan_text"), "accelctl.plan.render"),
    **dict.fromkeys(("named_target", "pick_rehearsal", "pick_target", "select_workloads"), "accelctl.plan.select"),
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def load(path: str | Path) -> tuple[WorkloadSpec, ...]:
    """Parse and check a workload file; raises ``WorkloadError`` with every diagnostic."""
    return load_source(path)[1]


def load_source(path: str | Path) -> tuple[str, tuple[WorkloadSpec, ...]]:
    """``load``, and the text it read (``read_source``: read once, so what a run stores is
    what was checked)."""
    text = read_source(path)
    return text, check(parse(text, str(path), cached=True))


def validate(path: str | Path, host=None) -> tuple[tuple[WorkloadSpec, ...], list[Diagnostic]]:
    """Parse and check a file, reporting rather than raising its problems: the workloads
    checked and every diagnostic (``accelctl validate``); ``host``: as for ``plan`` (the
    targets ``plan`` would refuse are planned for it)."""
    try:
        text = read_source(path)
    except WorkloadError as exc:
        return (), list(exc.diagnostics)
    return validate_text(text, path, host, cached=True)


def validate_text(text: str, path: str | Path = "<input>", host=None,
                  cached: bool = False) -> tuple[tuple[WorkloadSpec, ...], list[Diagnostic]]:
    """``validate`` of text already read (the TUI shows the text beside its diagnostics);
    ``cached``: ``text`` is the file at ``path`` as read (``parse``'s parsed-workload cache)."""
    try:
        specs, diags = check_all(parse(text, str(path), cached))
    except AccelctlError as exc:
        diags = exc.diagnostics or [Diagnostic("E000", str(exc), path=str(path))]
        return (), attach_source(diags, text)
    except Exception as exc:  # noqa: BLE001
        # a bug, not the file's fault: this file's report says so and the other files' go on
        # (tests/dsl/test_fuzz.py calls parse and check directly, so no bug hides behind this)
        why = f"{type(exc).__name__}: {str(exc)[:200]}"
        return (), [Diagnostic("E009", f"accelctl failed on this file ({why})", Span.point(1, 1), str(path),
                               "a bug in accelctl: please report it with this file")]
    if not any(d.severity == "error" for d in diags):
        # one verdict: what `plan` would refuse of a target, here at its line (accelctl.plan.verdict)
        from accelctl.plan.verdict import plan_refusals

        refused = attach_source([r for s in specs for r in plan_refusals(s, host)], text)
        diags = sorted([*diags, *refused], key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))
    return tuple(specs), list(diags)


def load_selected(path: str | Path, workload: str | None = None, sets=()) -> list[WorkloadSpec]:
    """``load`` then ``select_workloads``: the named workload of the file, or all of them."""
    return load_selected_source(path, workload, sets)[1]


def load_selected_source(path: str | Path, workload: str | None = None, sets=()) -> tuple[str, list[WorkloadSpec]]:
    """``load_selected``, and the text it read (``load_source``); ``sets``: ``--set KEY=VALUE``
    arguments, written into that text (``accelctl.language.settings``), which is then what was
    checked and what a run stores."""
    from accelctl.plan.select import select_workloads

    if sets:
        from accelctl.language import settings

        text = settings.applied(str(path), read_source(path), settings.parse_sets(list(sets)), workload)
        specs = check(parse(text, str(path)))
    else:
        text, specs = load_source(path)
    return text, select_workloads(specs, str(path), workload)


def plan(spec: WorkloadSpec, target: str | TargetSpec, engine: str | None = None, rehearse: bool = False,
         fp8: bool = False, device_path: bool = False, host=None):
    """Compile one target of a spec into an inert ``Plan`` (``rehearse``: its CPU rehearsal;
    ``fp8`` too: its FP8 rehearsal; ``device_path`` too: through the target backend's own
    device code path on this CPU where it has one and it is installed, e.g. a Neuron target on
    torch-xla's XLA CPU device), for the machine ``host`` describes
    (``accelctl.contract.hostfacts.HostFacts``; None: this one)."""
    from accelctl.plan.compile import compile_plan

    return compile_plan(spec, target, engine, rehearse, fp8, device_path, host=host)


def plan_refusal(spec: WorkloadSpec, target: TargetSpec, host=None, fixes: bool = True) -> Diagnostic | None:
    """Why ``plan`` refuses ``target`` of ``spec`` for ``host`` (its first diagnostic: plan's code,
    words, line and hint), or None where it plans: the one verdict the verbs that show a figure
    (estimate, sweep, pick, fit) ask before they show it.  ``fixes``: with the fixes that plan
    (a few plans more); those that ask of many points leave them out."""
    from accelctl.plan.compile import compile_plan

    try:
        compile_plan(spec, target, host=host, fixes=fixes)
    except PlanError as exc:
        return exc.diagnostics[0] if exc.diagnostics else Diagnostic("E520", str(exc), path=spec.path)
    return None


def one_process(spec: WorkloadSpec, target: TargetSpec) -> tuple[WorkloadSpec, TargetSpec, int]:
    """``(spec, target)`` as one process of ``measure { repeat = N }`` runs them, and N
    (``accelctl.run.supervision.orchestrate.one_process``)."""
    from accelctl.run.supervision.orchestrate import one_process as _one_process

    return _one_process(spec, target)


def launch(plan_, **kwargs):
    """Run a plan for real; returns a ``RunHandle`` streaming events."""
    from accelctl.run.supervision.runner import launch as _launch

    return _launch(plan_, **kwargs)


def start_blocker(plan_, runs_root: str | Path | None = None) -> str | None:
    """Why ``plan_``'s engine cannot start it from this machine, in one line; None: go ahead
    (``accelctl.run.supervision.orchestrate.start_blocker``)."""
    from accelctl.run.supervision.orchestrate import start_blocker as _start_blocker

    return _start_blocker(plan_, runs_root)


def tracking_blocker(spec: WorkloadSpec, plan_, only=None) -> Diagnostic | None:
    """E594 when the plan logs to a tracker this Python cannot import; None: go ahead
    (``accelctl.run.supervision.orchestrate.tracking_blocker``)."""
    from accelctl.run.supervision.orchestrate import tracking_blocker as _tracking_blocker

    return _tracking_blocker(spec, plan_, only)


def prepare_resume(run_id: str, runs_root: str | Path | None = None, workload_file: str | Path | None = None):
    """Check that a stored run can be resumed from its newest checkpoint and ready its folder
    (``accelctl.run.supervision.resume``); raises ``RunError`` saying why not."""
    from accelctl.run.supervision.resume import prepare_resume as _prepare

    return _prepare(run_id, runs_root, workload_file)


def resume(point, **kwargs):
    """Launch a prepared resume (``prepare_resume``) into its own run folder; a ``RunHandle``."""
    from accelctl.run.supervision.runner import launch as _launch

    return _launch(point.plan, source_text=None, spec_json=None, into=point.run_dir,
                   prior_events=point.prior_events, owner=point.owner, **kwargs)


def preflight(plan_, **kwargs):
    """The plan's preflight: its launches and engine with a seconds-long all-reduce in place of the
    worker (``accelctl.run.supervision.preflight.run_preflight``); a ``PreflightResult``."""
    from accelctl.run.supervision.preflight import run_preflight

    return run_preflight(plan_, **kwargs)


def check_plan(plan_, spec: WorkloadSpec):
    """Check a plan with the real software it targets, where installed (``accelctl plan --check``)."""
    from accelctl.plan.checks import check_plan as _check_plan

    return _check_plan(plan_, spec)


def list_runs(runs_root: str | Path | None = None):
    """The stored runs (``RunRecord``), newest first."""
    from accelctl.run.store import list_runs as _list_runs

    return _list_runs(runs_root)


def estimate_targets(spec: WorkloadSpec, targets, factors=None, calibrations=None, explain: bool = True,
                     host=None, verdict: bool = False):
    """``accelctl estimate``: one ``accelctl.estimate.roofline.Estimate`` per target, with
    ``factors`` for all, else the stored calibration of the target's device and precision
    (``calibrations``: ``accelctl.estimate.calibrate.load()``), else the catalog's; ``explain``
    False: without what only the why text and the memory line say (``roofline.estimate``).
    ``verdict``: each target is planned first (for ``host``), and one ``plan`` refuses gets no
    figure, only plan's code and words (``Estimate.refused``)."""
    from accelctl.estimate.calibrate import target_key
    from accelctl.estimate.factors import DEFAULT
    from accelctl.estimate.roofline import estimate, refused

    cal = calibrations or {}
    out = []
    for t in targets:
        if verdict:
            why = plan_refusal(spec, t, host)
            if why is not None:
                out.append(refused(spec, t, why, why.message))
                continue
        out.append(estimate(spec, t, factors or cal.get(target_key(t)) or DEFAULT, explain))
    return out


def estimate_factors(run_ids, runs_root=None):
    """``accelctl estimate --calibrate RUN...``: fit the factors of each device and precision to
    the user's recorded runs and store them beside the runs; returns (stored file, fitted)."""
    from accelctl.estimate.calibrate import fit_by_device, samples_from_runs, save

    fitted = fit_by_device(samples_from_runs(run_ids, runs_root))
    return save(fitted, runs_root), fitted


def estimate_calibrations(runs_root=None):
    """The stored calibration (``key(device, dtype)`` -> factors); {} when there is none."""
    from accelctl.estimate.calibrate import load

    return load(runs_root)



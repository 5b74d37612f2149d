"""One run orchestrator: what every face that starts runs does, in one place.

``accelctl run``, the TUI's ``r``, ``sweep --run``, ``run --resume`` and ``attach`` share these
steps: ``choose`` (each workload's target and plan; ``one_process``), ``refuse_unstartable`` (what
cannot start here, refused before any run folder exists), ``run_preflight``, ``Series``
(``measure { repeat = N }`` as N processes), ``plan_groups`` / ``run_all`` (workloads whose stacks
match share one worker) and ``exit_code``.  A face says how it shows things (``Face``); nothing
here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, Union

from accelctl import exitcodes
from accelctl.errors import AccelctlError, Diagnostic, RunError, attach_source
from accelctl.language import plugins
from accelctl.run.supervision.batch import Planned, Request
from accelctl.frozen import replace


def exit_code(status: str) -> int:
    """A finished run's exit status: ok 0, stopped 130, anything else (failed) 1."""
    return {"ok": exitcodes.OK, "stopped": exitcodes.STOPPED}.get(status, exitcodes.FAILED)


class Chosen(NamedTuple):
    """A workload, its plan (one process of a repeat series), why that target, and N; read
    through the same names as ``Planned``, what a supervisor is handed (``planned``)."""

    spec: Any
    plan: Any
    why: str
    repeats: int

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def spec_json(self) -> str:
        return self.spec.to_json()

    @property
    def world(self) -> int:
        """The planned world the preflight must form (0: a rehearsal, whatever the stand-in forms)."""
        return 0 if self.plan.rehearsal is not None else self.spec.target(self.plan.target).world_size

    def planned(self) -> Planned:
        return Planned(self.name, self.plan, self.spec_json, self.why, self.repeats, self.world)


#: what the run steps below read: a face's ``Chosen`` or a supervisor's ``Planned``
Runnable = Union[Chosen, Planned]


def one_process(spec, target):
    """``(spec, target)`` as one process of ``measure { repeat = N }`` runs them -- with one
    measured round (``repeat = 1``, in the workload's and the target's own measure) -- and N.
    Repeats are independent processes, so their spread is the run-to-run noise that
    ``accelctl compare`` draws its interval from."""
    n = spec.for_target(target).measure.repeat
    if n == 1:
        return spec, target, 1

    def once(m):
        return replace(m, repeat=1) if m is not None else None

    targets = tuple(replace(t, measure=once(t.measure)) for t in spec.targets)
    one = replace(spec, measure=once(spec.measure), targets=targets)
    return one, one.target(target.name), n


def choose(specs: Sequence[Any], req: Request, present=None) -> list[Chosen]:
    """Each workload's target and plan, as ``accelctl run`` picks them."""
    from accelctl.plan.compile import compile_plan
    from accelctl.plan.select import pick_rehearsal, pick_target

    out = []
    for spec in specs:
        if req.fp8 and not req.target:
            from accelctl.plan.rehearse import first_fp8_target

            target, why = first_fp8_target(spec), "--rehearse --fp8: the first fp8 target"
        elif req.rehearse and not req.target:
            target, why = pick_rehearsal(spec)
        else:
            target, why = pick_target(spec, req.target, present)
        one, t1, n = one_process(spec, target)
        plan = compile_plan(one, t1, req.engine, req.rehearse, req.fp8, req.rehearse)
        out.append(Chosen(spec, plan, why, n))
    return out


def tracking_blocker(spec, plan, only=None) -> Diagnostic | None:
    """E594 at the workload's ``track`` setting when the plan logs to a tracker whose library this
    Python cannot import (nothing imported); None: go ahead, or a runner of launches ``only``
    that does not log the run (``accelctl.plan.tracking.tracks_here``)."""
    import sys

    from accelctl.plan.tracking import install_hint, missing_trackers, tracks_here

    if not tracks_here(plan, only):
        return None
    missing = missing_trackers(plan.tracking)
    if not missing:
        return None
    span = spec.origins.get(f"track.{missing[0]}") or spec.origins.get("track")
    return Diagnostic("E594", f"track: {', '.join(missing)} cannot be imported by this Python ({sys.executable}): "
                      "the run would not be logged there", span, spec.path, install_hint(missing))


def start_blocker(plan, runs_root=None) -> str | None:
    """Why ``plan``'s engine cannot start it from this machine (``Engine.start_blocker``: no
    cluster configured, a run folder the pods cannot reach), in one line; None: go ahead."""
    from accelctl.plan.registry import ENGINES
    from accelctl.run.store import runs_root as resolve

    engine = ENGINES.get(plan.engine)
    return engine.start_blocker(plan, resolve(runs_root)) if engine is not None else None


def refuse_unstartable(chosen: Sequence[Chosen], source: str | None, req: Request, present=None) -> None:
    """Raise (``AccelctlError``: one line and its exit status, or ``RunError`` with the
    diagnostic) when a chosen run cannot start from here; nothing is started or written."""
    from accelctl.plan.render import env_filled
    from accelctl.plan.select import missing_here

    for c in chosen:
        p = c.plan
        if p.rehearsal is None:  # a rehearsal runs here
            why = missing_here(c.spec, c.spec.target(p.target), p.engine, present)
            if why is not None:
                raise AccelctlError(why, exit_code=exitcodes.NO_DEVICE)
        if p.engine in plugins.ENGINES and plugins.engine_row(p.engine).runs_here:  # launches this machine starts: their folders must resolve here
            unset = env_filled(p)[1]
            if unset:
                raise AccelctlError(f"target {p.target}: the plan runs in ${unset[0]} (the optimum-habana "
                                    f"checkout), which is not set: set {unset[0]} to that folder")
    for c in chosen:
        unknown = sorted(set(req.only or ()) - {ln.name for ln in c.plan.launches})
        if unknown:
            raise AccelctlError(f"target {c.plan.target} has no launch {', '.join(unknown)} "
                                f"(launches: {', '.join(ln.name for ln in c.plan.launches)})",
                                exit_code=exitcodes.USAGE)
    untracked = [d for c in chosen for d in [tracking_blocker(c.spec, c.plan, req.only)] if d is not None]
    if untracked:  # a tracker the workload names and this Python lacks: refused, never skipped
        raise RunError(diagnostics=attach_source(untracked[:1], source) if source else untracked[:1])
    for c in chosen:
        blocked = start_blocker(c.plan, req.runs_dir)
        if blocked:
            raise AccelctlError(f"target {c.plan.target} (engine {c.plan.engine}): {blocked}",
                                exit_code=exitcodes.FAILED)


def refusal_text(exc: AccelctlError) -> str:
    """A refusal in one line, for a face that shows no diagnostics block (the TUI's notice)."""
    return exc.diagnostics[0].message if exc.diagnostics else str(exc)


def preflight_line(c: Runnable) -> str:
    """What a face says as the preflight starts."""
    return f"preflight of target {c.plan.target} (world {c.world or '?'}, engine {c.plan.engine}) ..."


def run_preflight(c: Runnable, req: Request):
    """``c``'s preflight (``accelctl.run.supervision.preflight``); a ``PreflightResult``."""
    from accelctl.run.supervision.preflight import run_preflight as preflight

    return preflight(c.plan, planned=c.world, runs_dir=req.runs_dir, timeout_s=req.preflight_timeout,
                     only=req.only)


def wait(handle):
    """The run's result; a Ctrl-C (or a signal the face turned into one) while waiting stops the
    run, which is then waited for and returned as ``stopped``."""
    try:
        return handle.wait()
    except KeyboardInterrupt:
        handle.stop()
        return handle.wait()


class Series:
    """``measure { repeat = N }``: N independent processes of one chosen plan, run one after the
    other; with N > 1 each run folder gets ``series.json`` (the series' id is the first run's).
    A repeat that does not end ok ends the series."""

    def __init__(self, c: Runnable, source: str | None, req: Request) -> None:
        self.chosen, self.source, self.req = c, source, req
        self.index = 0
        self.series_id: str | None = None
        self.status = "ok"

    @property
    def more(self) -> bool:
        """Another repeat is due: every one so far ended ok and fewer than N ran."""
        return self.status == "ok" and self.index < self.chosen.repeats

    def start(self, sinks: Sequence[Any] = ()):
        """Launch the next repeat; its ``RunHandle``."""
        from accelctl.run.supervision.runner import launch
        from accelctl.run.store import write_series

        c, n = self.chosen, self.chosen.repeats
        self.index += 1
        handle = launch(c.plan, source_text=self.source, spec_json=c.spec_json, runs_root=self.req.runs_dir,
                        sinks=list(sinks), only=self.req.only)
        if n > 1:
            self.series_id = self.series_id or handle.run_id
            try:
                write_series(handle.run_dir, self.series_id, self.index, n)
            except OSError as exc:  # a full disk: the run ends store_error, as for its other files
                handle.fail_store(exc, "series.json")
        return handle

    def ended(self, status: str) -> None:
        """A repeat's status: the series goes on only after an ok one."""
        self.status = status

    def run(self, make_sinks: Callable[[], Sequence[Any]], say: Callable[..., None]) -> Iterator[tuple[Any, Any]]:
        """Run every repeat, waiting for each; yields (result, its sinks) as each ends."""
        n = self.chosen.repeats
        while self.more:
            if n > 1:
                say(f"repeat {self.index + 1} of {n} (an independent process; measure {{ repeat = {n} }})")
            sinks = make_sinks()
            result = wait(self.start(sinks))
            self.ended(result.status)
            yield result, sinks
            if result.status != "ok" and n > 1:
                say(f"repeat {self.index} of series {self.series_id} {result.status}: the series stops there",
                    error=True)
        if self.status == "ok" and self.series_id:
            say(f"series {self.series_id}: {n} runs ok; `accelctl compare {self.series_id} OTHER` compares it "
                "run-to-run")

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)


class Face(Protocol):
    """How a face shows a batch of runs (``run_all``)."""

    def say(self, text: str, error: bool = False) -> None: ...
    def announce(self, c: Runnable, only) -> None: ...
    def preflighted(self, c: Runnable, result) -> None: ...
    def sinks(self, c: Runnable) -> Sequence[Any]: ...
    def ran(self, c: Runnable, result, sinks, series_id: str | None) -> int | None: ...
    def not_run(self, names: list[str]) -> None: ...


def plan_groups(chosen: Sequence[Runnable], req: Request) -> list[list[int]]:
    """Indexes of ``chosen`` grouped into worker processes: workloads whose stacks match share one
    (``accelctl.run.supervision.shared``); a preflight, ``--launch`` and repeats (independent processes) keep
    one each."""
    if req.only is not None or req.preflight:
        return [[i] for i in range(len(chosen))]
    from accelctl.run.supervision.shared import groups

    return groups([c.plan if c.repeats == 1 else None for c in chosen])


def run_all(chosen: Sequence[Runnable], source: str | None, req: Request, face: Face) -> int:
    """Run every chosen workload in order, as ``accelctl run FILE`` does; the exit status: 0 all
    ok, 1 one failed, 130 stopped (a stop ends the batch), or what ``face.ran`` said."""
    code = exitcodes.OK
    for group in plan_groups(chosen, req):
        if len(group) > 1:
            got = _run_shared([chosen[i] for i in group], source, req, face)
        else:
            got = _run_one(chosen[group[0]], group[0], len(chosen), source, req, face)
        if got == exitcodes.STOPPED:  # Ctrl-C, or ``x`` in the live TUI: the whole batch stops
            return got
        code = code or got
    return code


def _run_one(c: Runnable, index: int, count: int, source, req: Request, face: Face) -> int:
    face.announce(c, req.only)
    if req.preflight:
        face.say(preflight_line(c))
        result = run_preflight(c, req)
        face.preflighted(c, result)
        if not result.ok:
            return exitcodes.FAILED
    series = Series(c, source, req)
    for result, sinks in series.run(lambda: face.sinks(c), face.say):
        override = face.ran(c, result, sinks, series.series_id)
        if override is not None:
            return override
    return series.exit_code


def _run_shared(items: Sequence[Runnable], source, req: Request, face: Face) -> int:
    """Several workloads' plans in ONE worker process (``accelctl.run.supervision.shared``), each still a run
    of its own.  A failed run does not stop the next; a stop ends them all (the runs not started
    are not recorded, and named through ``face.not_run``)."""
    from accelctl.run.supervision.shared import SharedRuns

    runs = SharedRuns([c.plan for c in items], source_text=source, spec_jsons=[c.spec_json for c in items],
                      runs_root=req.runs_dir)
    code = exitcodes.OK
    try:
        for k, c in enumerate(items):
            face.announce(c, None)
            if k == 0:
                face.say(f"one worker process runs workloads {', '.join(i.name for i in items)} in order "
                         "(the same stack: command, environment, backend)")
            sinks = face.sinks(c)
            result = runs.start(list(sinks)).wait()  # Ctrl-C / SIGTERM while it waits: stopped, then returned
            override = face.ran(c, result, sinks, None)
            if override is not None:  # ``accelctl run | head``: the others run on; the exit says so
                code = override
            if result.status == "stopped":
                code = exitcodes.STOPPED
                break
            code = code or exit_code(result.status)
    except KeyboardInterrupt:
        runs.stop()
        code = exitcodes.STOPPED
    finally:
        not_run = runs.close()
    if not_run:
        face.not_run(not_run)
    return code

"""``run_live``: run a plan inside this process with the live run screen (the TUI overhead
benchmark, ``bench/tui_overhead.py``, and tests); ``attach_live``: ``accelctl attach RUN``.

``accelctl run FILE`` on a terminal and ``r`` in ``accelctl tui`` do not run here: the run has
its own supervisor, which the TUI views (``accelctl.tui.supervised``).  ``run_live`` is kept as
the one in-process path on purpose: the overhead benchmark measures what the display costs the
run it shares the machine with, display and runner in one process whose display thread alone is
lowered (``accelctl.tui.priority``), without a supervisor's start-up in the figure; the tests of
the live panels use it with a replaying worker (no torch).  Here the run goes through the runner
in this process (its own process group; ``events.jsonl``, ``worker.log`` and ``summary.json`` in the
run store) and the TUI only reads it; if the TUI ends while the run still goes (it crashed),
the run is stopped and waited for -- nothing of it outlives this process -- and the exit code
says how it went: 0 ok, 1 failed, 130 stopped.

    python -m accelctl.tui.live FILE [-w WORKLOAD] [-t TARGET] [--runs-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelctl.run.supervision.orchestrate import exit_code
from accelctl.tui.supervised import print_summaries


def run_live(plan, spec, source_text, runs_root, *, headless: bool = False, auto_exit: bool = False,
             size: tuple[int, int] | None = None, app_factory=None, lower_priority: bool | None = None) -> int:
    """Launch ``plan`` and show it live; returns 0 ok, 1 failed, 130 stopped.

    ``headless``/``size``/``auto_exit`` (leave the app when the run ends) are for tests
    and the overhead benchmark; ``app_factory(**kwargs)`` replaces the app class.
    ``lower_priority`` (default: when not headless): the display's thread runs at a lower
    CPU priority than the run (``accelctl.tui.priority``).
    """
    if lower_priority is None:
        lower_priority = not headless
    from accelctl.api import launch

    spec_json = spec.to_json() if spec is not None else None
    handle = launch(plan, source_text=source_text, spec_json=spec_json, runs_root=runs_root)
    crashed = None
    try:
        from accelctl.tui.app import AccelctlApp, Selection

        factory = app_factory or AccelctlApp
        path = Path(spec.path) if spec is not None and spec.path and spec.path != "<input>" else None
        app = factory(path, runs_root=runs_root, live_handle=handle, auto_exit=auto_exit,
                      selection=Selection(path, getattr(spec, "name", None), plan.target))
        if lower_priority:
            from accelctl.tui.priority import lower_this_thread

            lower_this_thread()  # the display yields the CPU to the run (started above, at normal priority)
        app.run(headless=headless, size=size)
        if app.return_code not in (0, 130, None) and not handle.done:
            crashed = "the TUI ended with an error"
    except KeyboardInterrupt:
        handle.stop()
    except Exception as exc:  # noqa: BLE001 - the run must outlive a broken display
        crashed = f"the TUI failed: {type(exc).__name__}: {exc}"
    if not handle.done:  # no viewer left: the run this process owns ends with it
        print(f"accelctl: {crashed or 'the TUI ended before the run'}; stopping run {handle.run_dir.name}",
              file=sys.stderr, flush=True)
        handle.stop()
    result = handle.wait()
    print_summaries([result.run_dir])
    return exit_code(result.status)


def attach_live(run_dir: Path, runs_root, *, headless: bool = False, size: tuple[int, int] | None = None) -> None:
    """``accelctl attach RUN`` on a terminal: the run's view in the TUI, replayed from its folder and
    followed while its own supervisor still writes it.  Leaving (``q``, Ctrl-C, a hang-up) only
    detaches: the TUI never stops a run it did not start."""
    from accelctl.tui.app import AccelctlApp

    app = AccelctlApp(None, runs_root=runs_root, start="runs", attach=Path(run_dir))
    try:
        app.run(headless=headless, size=size)
    except KeyboardInterrupt:
        pass


def main(argv=None) -> int:
    import argparse

    from accelctl.api import AccelctlError, load_source, select_workloads
    from accelctl.run.supervision import orchestrate

    ap = argparse.ArgumentParser(prog="python -m accelctl.tui.live", description="accelctl run FILE, with the TUI")
    ap.add_argument("file")
    ap.add_argument("--workload", "-w")
    ap.add_argument("--target", "-t")
    ap.add_argument("--engine", "-e")
    ap.add_argument("--runs-dir", default=None)
    ap.add_argument("--auto-exit", action="store_true", help="leave the TUI when the run ends")
    args = ap.parse_args(argv)
    source, specs = load_source(args.file)  # read once: the run stores what was checked
    try:
        spec = select_workloads(specs, args.file, args.workload)[0]
    except AccelctlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    req = orchestrate.Request(target=args.target, engine=args.engine, runs_dir=args.runs_dir)
    c, = orchestrate.choose([spec], req)
    if c.repeats > 1:  # one run of a repeat series: `accelctl run` runs them all
        print(f"accelctl: measure {{ repeat = {c.repeats} }}: this runs one of the {c.repeats} independent runs "
              "(accelctl run FILE runs the whole series)", file=sys.stderr)
    try:  # as `accelctl run` refuses it: before a run folder exists
        orchestrate.refuse_unstartable([c], source, req)
    except AccelctlError as exc:
        print(f"accelctl: error: {orchestrate.refusal_text(exc)}", file=sys.stderr)
        return exc.exit_code
    return run_live(c.plan, spec, source, args.runs_dir, auto_exit=args.auto_exit)


if __name__ == "__main__":
    sys.exit(main())

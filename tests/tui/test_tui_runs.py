"""``r`` in ``accelctl tui`` (issue 25 item 3: the TUI only displays and sends commands): the run
is checked and planned as ``accelctl run FILE -w W -t T`` does it, started under its own
supervisor on that plan (``accelctl.tui.supervised.start``), and viewed from its folder; ``x`` sends the stop to that
supervisor; ``q`` asks stop / leave, and leaving leaves the run going; once it ends the TUI stays
up.  Real supervisors, real torch runs of a tiny model (a few seconds each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_json_output import TINY_RUN  # the cheapest real run the suite makes
from tui_screen import wait_for

from accelctl import exitcodes
from accelctl.entrypoints import SUPERVISOR
from accelctl.run import store
from accelctl.run.supervision import detach
from accelctl.tui.app import AccelctlApp, Selection
from accelctl.tui.screens.dialogs import QuitScreen

pytestmark = pytest.mark.slow


def _workload(tmp_path: Path, steps: int, repeat: int = 1) -> Path:
    assert "steps = 5 steps" in TINY_RUN
    measure = f"steps = {steps} steps" + (f"  repeat = {repeat}" if repeat > 1 else "")
    text = TINY_RUN.replace("steps = 5 steps", measure)
    folder = tmp_path / "wl"
    folder.mkdir()
    path = folder / "w.wl"
    path.write_text(text, encoding="utf-8")
    return path


def _app(tmp_path: Path, steps: int, repeat: int = 1) -> tuple[AccelctlApp, Path]:
    path = _workload(tmp_path, steps, repeat)
    runs = tmp_path / "runs"
    app = AccelctlApp(path, runs_root=runs, selection=Selection(path, "tiny_json", "cpu"))
    app.shown = []
    notify = app.notify
    app.notify = lambda message, **kw: (app.shown.append(message), notify(message, **kw))[1]  # each notice, kept
    return app, runs


def _runs(runs: Path) -> list[Path]:
    return sorted(r for r in runs.iterdir() if store.is_run_id(r.name)) if runs.is_dir() else []


def _nothing_left(run_dir: Path) -> None:
    """No process of the run, and its supervisor gone."""
    runner = str(store.read_json(run_dir / store.RUNNER_FILE)["runner"])
    deadline = time.monotonic() + 30
    while (detach.run_processes(run_dir) or detach.supervision.alive(runner)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert detach.run_processes(run_dir) == [] and not detach.supervision.alive(runner)


def _status(run_id: str, runs: Path) -> dict:
    """``accelctl status RUN --json``, from another process."""
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "status", run_id, "--json", "--runs-dir", str(runs)],
                        capture_output=True, text=True, timeout=60)
    return json.loads(cp.stdout)["result"]["runs"][0]


def _supervisor_pid(run_dir: Path) -> int:
    return int(str(store.read_json(run_dir / store.RUNNER_FILE)["runner"]).partition(":")[0])


async def _first_step(pilot, app: AccelctlApp) -> None:
    """``r`` pressed, and the run's first step on screen."""
    await pilot.pause()
    await pilot.press("r")
    await wait_for(pilot, lambda: app.live is not None and app.screen.model.rank0, timeout=240, what="the first step")


@pytest.mark.asyncio
async def test_r_starts_the_run_under_its_own_supervisor_and_the_tui_stays_up_after(tmp_path):
    app, runs = _app(tmp_path, 3)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: app.supervisor is not None, what="the supervisor")
        sup = app.supervisor
        await wait_for(pilot, lambda: app.live is not None and app.live.done and app.supervisor is None, timeout=240,
                       what="the run, to its end, and its supervisor's")
        await pilot.pause(0.3)
        assert app.is_running and app.check_action("run", ()) is True  # still up: `r` can start another
        assert app.screen.model.status == "ok"
    (run_dir,) = _runs(runs)
    assert _supervisor_pid(run_dir) == sup.pid != os.getpid()  # its folder names the supervisor, not the TUI
    assert sup.spawned.proc.args[1:] == ["-m", SUPERVISOR] and sup.spawned.proc.returncode == 0
    assert store.read_run(run_dir).status == "ok"
    _nothing_left(run_dir)
    assert not sup.spawned.console.parent.exists()  # its console folder went with it


@pytest.mark.asyncio
async def test_x_sends_the_stop_to_the_supervisor_and_the_run_ends_stopped(tmp_path):
    app, runs = _app(tmp_path, 5000)
    async with app.run_test(size=(120, 30)) as pilot:
        await _first_step(pilot, app)
        sup = app.supervisor
        assert os.getsid(sup.pid) == sup.pid != os.getsid(0)  # a session of its own, not the TUI's
        await pilot.press("x")
        await wait_for(pilot, lambda: app.supervisor is None, timeout=60, what="the supervisor's end")
        assert app.screen.model.status == "stopped" and app.is_running
    assert sup.stop_sent and sup.spawned.proc.returncode == exitcodes.STOPPED
    (run_dir,) = _runs(runs)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"
    _nothing_left(run_dir)


@pytest.mark.asyncio
async def test_q_then_leave_exits_the_tui_and_the_run_goes_on_to_its_end(tmp_path, capsys):
    from accelctl.cli.tui import left_going

    app, runs = _app(tmp_path, 1500)
    async with app.run_test(size=(120, 30)) as pilot:
        await _first_step(pilot, app)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the question")
        await pilot.press("l")  # leave it running
        await pilot.pause()
    assert app.return_code == exitcodes.STOPPED
    sup = app.supervisor
    assert sup is not None and not sup.ended() and not sup.stop_sent
    left_going(sup)  # what `accelctl tui` says as it leaves
    run_id = sup.runs[-1].name
    assert f"accelctl attach {run_id}" in capsys.readouterr().err
    state = _status(run_id, runs)
    assert (state["state"], state["supervisor_pid"]) == ("running", sup.pid), state
    sup.spawned.proc.wait(timeout=240)
    assert _status(run_id, runs)["state"] == "ok"
    _nothing_left(runs / run_id)


@pytest.mark.asyncio
async def test_a_repeat_series_is_run_by_the_supervisor_and_each_run_shown_in_turn(tmp_path):
    app, runs = _app(tmp_path, 2, repeat=2)
    app.preflight = True
    seen = []
    real = app._show_live

    async def show(source):
        seen.append((source.run_dir, app.context_text()))
        await real(source)

    app._show_live = show
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: app.supervisor is not None, what="the supervisor")
        sup = app.supervisor
        await wait_for(pilot, lambda: app.supervisor is None, timeout=600, what="the series, to its end")
    assert [d for d, _ in seen] == sup.runs == _runs(runs)
    assert [c.split(" · ")[0] for _, c in seen] == ["repeat 1 of 2", "repeat 2 of 2"]
    preflights = [p for p in (runs / "preflight").iterdir() if p.is_dir()]
    assert len(preflights) == 1, preflights  # the preflight, run by the supervisor as `run --preflight` runs it
    assert app.shown[0] == "preflight of target cpu (world 1, engine local) ...", app.shown
    assert app.shown[1].startswith("preflight ok: all-reduce over 1 rank(s) (local, "), app.shown  # its verdict
    assert app.shown[2:4] == [f"repeat {i} of 2 (an independent process; measure {{ repeat = 2 }})" for i in (1, 2)]
    marks = [json.loads((p / "series.json").read_text()) for p in sup.runs]
    assert [m["index"] for m in marks] == [1, 2] and {m["of"] for m in marks} == {2}
    assert len({m["id"] for m in marks}) == 1
    assert all(store.read_run(p).status == "ok" and _supervisor_pid(p) == sup.pid for p in sup.runs)
    for p in sup.runs:
        _nothing_left(p)


def test_the_supervisor_runs_at_the_priority_the_app_was_made_with_not_the_displays(tmp_path):
    """``accelctl tui`` lowers its display's thread (``accelctl.tui.priority``); a process inherits
    the priority of the thread that forks it, so ``r`` spawns the supervisor from the launcher
    thread, made with the app.  Here in a thread of its own, which alone is lowered."""
    import asyncio
    import threading

    from accelctl.tui.priority import lower_this_thread

    got: dict = {}

    def display() -> None:
        app, _ = _app(tmp_path, 3)  # its launcher thread: at this thread's priority
        got["made"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        got["lowered"] = lower_this_thread() and os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

        async def drive() -> None:
            async with app.run_test(size=(120, 30)) as pilot:
                await pilot.pause()
                await pilot.press("r")
                # the checks before the start run in this lowered thread: slow on a loaded machine
                await wait_for(pilot, lambda: app.supervisor is not None, timeout=120, what="the supervisor")
                got["supervisor"] = os.getpriority(os.PRIO_PROCESS, app.supervisor.pid)
                await wait_for(pilot, lambda: app.supervisor is None, timeout=240, what="the run, to its end")
                got["status"] = app.screen.model.status

        try:
            asyncio.run(drive())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            got["error"] = exc

    thread = threading.Thread(target=display)
    thread.start()
    thread.join(timeout=420)
    if "error" in got:
        raise got["error"]
    if not got["lowered"] or got["lowered"] == got["made"]:
        pytest.skip(f"this thread's priority could not be lowered here (nice {got['made']}): not run")
    assert got["supervisor"] == got["made"] < got["lowered"], got
    assert got["status"] == "ok"


@pytest.mark.asyncio
async def test_a_file_changed_after_the_tui_read_it_runs_as_the_tui_checked_it(tmp_path):
    """The supervisor is given the plan the TUI made and never reads the file again: bytes written
    to the file after the TUI read it (here a workload that does not validate) change nothing."""
    app, runs = _app(tmp_path, 3)
    checked = app.selection.path.read_text()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        app.selected_spec()  # read and checked by the TUI
        app.selection.path.write_text("workload tiny_json {\n  task pretrain { objective = nope }\n}\n")
        await pilot.press("r")
        await wait_for(pilot, lambda: app.live is not None and app.live.done and app.supervisor is None,
                       timeout=240, what="the run, to its end, and its supervisor's")
        assert app.is_running and app.screen.model.status == "ok"
    (run_dir,) = _runs(runs)
    assert (run_dir / "workload.wl").read_text() == checked


@pytest.mark.asyncio
async def test_a_supervisor_that_ends_before_any_run_is_a_notice_and_the_tui_stays_up(tmp_path):
    """The supervisor cannot make the run's folder (a file holds the store's place): it ends before
    any run, and its first error line is the TUI's notice."""
    app, runs = _app(tmp_path, 3)
    runs.write_text("not a folder")
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        ended = []  # the supervisor as its end is handled: its refusal can come before a poll sees it
        handle_end = app._supervisor_ended
        app._supervisor_ended = lambda sup: (ended.append(sup), handle_end(sup))[1]
        await pilot.press("r")
        await wait_for(pilot, lambda: ended and app.supervisor is None, timeout=60, what="the supervisor's end")
        assert app.is_running and app.live is None
    (sup,) = ended
    assert sup.spawned.proc.returncode == exitcodes.FAILED and sup.runs == []
    assert any("run store: File exists creating a run folder" in m for m in app.shown), app.shown


@pytest.mark.asyncio
async def test_accelctl_cancel_from_another_process_stops_the_run_the_tui_shows(tmp_path):
    """The run ``r`` started is an ``accelctl run``'s like any other: ``accelctl cancel RUN`` (which
    refuses runs inside another process) stops it; the TUI shows it ``stopped`` and stays up."""
    app, runs = _app(tmp_path, 5000)
    async with app.run_test(size=(120, 30)) as pilot:
        await _first_step(pilot, app)
        run_id = app.live.run_id
        cancel = subprocess.run([sys.executable, "-m", "accelctl.cli", "cancel", run_id, "--runs-dir", str(runs)],
                                capture_output=True, text=True, timeout=120)
        assert cancel.returncode == 0, cancel.stderr
        await wait_for(pilot, lambda: app.supervisor is None, timeout=60, what="the supervisor's end")
        assert app.screen.model.status == "stopped" and app.is_running
    _nothing_left(runs / run_id)


@pytest.mark.asyncio
async def test_a_sigterm_to_the_tui_stops_the_run_and_the_tui_leaves_once_it_ended(tmp_path):
    import signal

    from accelctl.run.supervision.foreground import Signals

    path = _workload(tmp_path, 5000)
    runs = tmp_path / "runs"
    with Signals() as signals:  # as `accelctl tui` runs its app
        app = AccelctlApp(path, runs_root=runs, selection=Selection(path, "tiny_json", "cpu"), signals=signals)
        async with app.run_test(size=(120, 30)) as pilot:
            await _first_step(pilot, app)
            sup = app.supervisor
            os.kill(os.getpid(), signal.SIGTERM)
            await wait_for(pilot, lambda: not app.is_running, timeout=60, what="the app to leave")
    assert sup.stop_sent and sup.ended()
    (run_dir,) = _runs(runs)
    assert store.read_run(run_dir).status == "stopped"
    _nothing_left(run_dir)

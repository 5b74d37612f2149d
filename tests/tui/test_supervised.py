"""``accelctl run FILE`` on a terminal = start + attach (issue 25, item 1): the TUI views the runs
of their own supervisor (``accelctl.tui.supervised``), in turn; a stop asked in the TUI is sent to
the supervisor and the run ends ``stopped``; leaving only detaches.  Real supervisors, real
torch runs of a tiny model (a few seconds each)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_json_output import TINY_RUN  # the cheapest real run the suite makes

from accelctl import api, exitcodes
from accelctl.run import store
from accelctl.run.supervision import batch, detach, orchestrate
from accelctl.tui.app import AccelctlApp, Selection
from accelctl.tui.screens.dialogs import QuitScreen
from accelctl.tui.supervised import view

pytestmark = pytest.mark.slow



def tiny(name: str, steps: int) -> str:
    """The suite's cheapest real run (``test_json_output.TINY_RUN``) named ``name``, ``steps`` long."""
    assert "workload tiny_json {" in TINY_RUN and "steps = 5 steps" in TINY_RUN
    return TINY_RUN.replace("tiny_json", name).replace("steps = 5 steps", f"steps = {steps} steps")


class Watched(AccelctlApp):
    """The app as ``accelctl run`` makes it; records its top bar as each run ends and does
    ``act`` (an action name) once the first step is on screen; leaves when the supervisor is done."""

    act: str | None = None
    seen: list[str] = []

    def on_run_ended(self, message) -> None:
        Watched.seen.append(self.context_text())
        super().on_run_ended(message)

    def on_run_events(self, message) -> None:
        if Watched.act and any(e.kind == "step" for e in message.events):
            act, Watched.act = Watched.act, None
            self.call_later(getattr(self, f"action_{act}"))

    def on_mount(self) -> None:
        self.set_interval(0.2, self._leave_when_done)

    def _leave_when_done(self) -> None:
        if isinstance(self.screen, QuitScreen):
            self.screen.action_leave()  # "leave it running"
        # pending(), not next_run(): a run handed out here would never be shown (seen at load 5:
        # the supervisor ended before the first run's end was drawn, and the second was lost)
        elif self.supervisor.ended() and self._live_ended and not self.supervisor.pending():
            self.exit()


def _view(tmp_path: Path, *workloads: tuple[str, int], app=None):
    wl = tmp_path / "w.wl"
    wl.write_text("".join(tiny(n, s) for n, s in workloads))
    runs = tmp_path / "runs"
    req = orchestrate.Request(runs_dir=str(runs))
    source, specs = api.load_selected_source(str(wl), None, [])
    given = batch.Batch(tuple(c.planned() for c in orchestrate.choose(specs, req)), source, req)  # as `run` plans
    viewed = view(given, runs, wl, Selection(wl, workloads[0][0], "cpu"), len(workloads), headless=True,
                  size=(100, 30), app_factory=app or Watched)
    return viewed, runs


def _ends_ok(run_dir: Path) -> None:
    """The detached run ends ok, nothing of it left."""
    deadline = time.monotonic() + 120
    while detach.liveness.in_progress(store.read_run(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert store.read_run(run_dir).status == "ok"
    assert detach.run_processes(run_dir) == []


def _statuses(runs: Path) -> list[str]:
    return [json.loads((r / "summary.json").read_text())["status"] for r in sorted(runs.iterdir())
            if store.is_run_id(r.name)]


def test_the_runs_of_a_file_are_shown_in_turn_and_the_exit_is_the_runs(tmp_path, capsys):
    Watched.act, Watched.seen = None, []
    viewed, runs = _view(tmp_path, ("first", 3), ("second", 3))
    assert (viewed.code, viewed.detached) == (exitcodes.OK, "")
    assert _statuses(runs) == ["ok", "ok"]
    assert [s.split(" · ")[0] for s in Watched.seen] == ["1 of 2", "2 of 2"]
    out = capsys.readouterr().out
    assert out.count("status: ok") == 2  # each run's summary stays printed after the TUI


def test_a_stop_in_the_tui_is_sent_to_the_supervisor_and_the_run_ends_stopped(tmp_path):
    Watched.act, Watched.seen = "stop", []
    viewed, runs = _view(tmp_path, ("long", 5000), ("never", 3))
    assert (viewed.code, viewed.detached) == (exitcodes.STOPPED, "")
    assert _statuses(runs) == ["stopped"]  # the batch stops there: the second never starts
    assert Watched.seen and "ended" in Watched.seen[-1]
    (run_dir,) = [r for r in runs.iterdir() if store.is_run_id(r.name)]
    assert detach.run_processes(run_dir) == [] and not detach.supervision.alive(
        str(store.read_json(run_dir / store.RUNNER_FILE)["runner"]))


def test_leaving_while_the_run_goes_on_only_detaches(tmp_path):
    Watched.act, Watched.seen = "quit", []
    # long enough to still go when the leave is answered on a loaded machine (150 steps had ended
    # by then at load 5: the viewer saw the end, not a detach)
    viewed, runs = _view(tmp_path, ("going", 1500))
    assert viewed.detached == "you left the view" and viewed.code == exitcodes.STOPPED
    _ends_ok(runs / viewed.run_id)  # it goes on to its end without the viewer


class Broken(Watched):
    """A TUI that dies once the run's first steps are on screen."""

    def on_run_events(self, message) -> None:
        raise RuntimeError("the display broke")


def test_a_tui_that_fails_only_detaches_and_the_run_goes_on(tmp_path, capsys):
    viewed, runs = _view(tmp_path, ("going", 150), app=Broken)
    assert viewed.detached.startswith("the TUI failed"), viewed
    assert "RuntimeError: the display broke" in capsys.readouterr().err  # Textual's report of it
    _ends_ok(runs / viewed.run_id)

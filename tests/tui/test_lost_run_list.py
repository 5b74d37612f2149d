"""Issue 22 #2 in the TUI: the run list over a store with a lost run (no summary, its runner
dead) whose ``rank0.jsonl`` is a FIFO and one whose ``events.jsonl`` links to ``/dev/zero``:
listed ``unreadable: <reason>`` at once, the other runs as they are."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from textual.widgets import DataTable
from tui_fixtures import WORKLOADS, recorded
from tui_screen import screen_text

from accelctl.run import store
from accelctl.tui.app import AccelctlApp

pytestmark = pytest.mark.asyncio


def _lost(src, dest) -> None:
    """A copy of a recorded run as SIGKILL leaves one: no summary, runner.json naming a gone runner."""
    shutil.copytree(src, dest)
    (dest / "summary.json").unlink()
    (dest / "job.json").write_text(json.dumps(json.loads((dest / "plan.json").read_text())["job"]))
    store.write_runner(dest, "1:1", [])  # pid 1 never started at tick 1: gone


async def test_lost_runs_with_special_files_are_listed_unreadable(tmp_path):
    good = recorded("tui_train-cpu-")
    shutil.copytree(good, tmp_path / good.name)
    fifo = tmp_path / recorded("tui_train-cpu2-").name
    _lost(recorded("tui_train-cpu2-"), fifo)
    os.mkfifo(fifo / "rank0.jsonl")
    zero = tmp_path / recorded("tui_generate-cpu-").name
    _lost(recorded("tui_generate-cpu-"), zero)
    (zero / "events.jsonl").unlink()
    (zero / "events.jsonl").symlink_to("/dev/zero")
    app = AccelctlApp(WORKLOADS, runs_root=tmp_path)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.press("4")
        await pilot.pause()
        status = {r.id: r.status for r in app.screen.records}
        assert status == {good.name: "ok", fifo.name: "unreadable: rank0.jsonl is a FIFO",
                          zero.name: "unreadable: events.jsonl is a symbolic link"}
        table = app.screen.query_one(DataTable)
        assert {r.id: str(table.get_cell(r.id, "status")) for r in app.screen.records} == status
        assert "unreadable: rank0.jsonl is a FIFO" in screen_text(app)
    assert not (fifo / "summary.json").exists() and not (zero / "summary.json").exists()


@pytest.mark.parametrize("how", ["a link", "a FIFO"])
async def test_a_replayed_run_ends_with_the_stores_reading_of_its_folder(tmp_path, how):
    """The run view's replay ends with the status ``runs``/``status``/``report`` give the same
    folder: an events file that is a link or a FIFO is unreadable there too, never "ok"."""
    from accelctl.tui.feed import ReplaySource

    good = recorded("tui_train-cpu-")
    run = tmp_path / good.name
    shutil.copytree(good, run)
    events = run / store.EVENTS_FILE
    events.unlink()
    if how == "a link":
        events.symlink_to("/etc/hostname")
    else:
        os.mkfifo(events)
    source = ReplaySource(run)
    while not source.read(0.01)[1]:
        pass
    status, summary = source.result()
    assert status == store.read_run(run).status and status.startswith("unreadable: ") and summary is None

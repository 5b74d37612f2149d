"""Snapshot tests (pytest-textual-snapshot): every screen at 80x24 and 120x40.

Deterministic by construction: the screens show only the fixture files (recorded runs,
fixture workloads with a fixed ``memory``), times come from the recorded events, no
clock is shown.  The Plan screen shows the plans recorded with the runs (``plan.json``),
not freshly planned ones, so a change to a backend does not move these snapshots (the
backends have their own golden plans).  Update after an intended change with
``ACCELCTL_UPDATE_GOLDEN=1 pytest tests/tui`` (the suite's one rule, tests/golden_files.py: it turns on
syrupy's ``--snapshot-update``) and look at the SVGs in ``tests/tui/__snapshots__``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pytest_textual_snapshot")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

from golden_files import check_no_stale  # noqa: E402
from tui_fixtures import STORE, WORKLOADS, recorded  # noqa: E402
from tui_screen import wait_for  # noqa: E402

from accelctl.api import render_plan_text  # noqa: E402
from accelctl.contract.plan import Plan  # noqa: E402
from accelctl.tui.app import AccelctlApp  # noqa: E402
from accelctl.tui.screens.run import RunScreen  # noqa: E402
from accelctl.tui.workspace import PlanResult  # noqa: E402

SIZES = [(80, 24), (120, 40)]


class RecordedPlansApp(AccelctlApp):
    """The app, with each target's plan read from the recorded run of that target."""

    def plan_for(self, spec, target: str) -> PlanResult:
        plan = Plan.from_dict(json.loads((recorded(f"{spec.name}-{target}-") / "plan.json").read_text()))
        return PlanResult(plan=plan, text=render_plan_text(plan))


def app() -> AccelctlApp:
    return RecordedPlansApp(WORKLOADS, runs_root=STORE)


async def _replayed(pilot) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, RunScreen) and pilot.app.screen.model.summary
                   is not None, what="the replay to end")


def _open_run(row: int):
    """Runs view, cursor on ``row`` (newest first), open it, wait for the replay to end."""

    async def run_before(pilot) -> None:
        await pilot.press("4")
        await pilot.pause()
        for _ in range(row):
            await pilot.press("down")
        await pilot.press("enter")
        await _replayed(pilot)

    return run_before


# newest first: 0 ddp, 1 generate, 2 train cpu2, 3 train cpu
CASES = {
    "workloads": dict(press=[]),
    "workloads_diagnostics": dict(press=["up"]),
    "plan": dict(press=["2"]),
    "plan_diff": dict(press=["2", "d"]),
    "runs": dict(press=["4"]),
    "run_train": dict(run_before=_open_run(3)),
    "run_generate": dict(run_before=_open_run(1)),
    "run_ddp": dict(run_before=_open_run(0)),
    "compare": dict(press=["4", "down", "down", "space", "down", "space", "c"]),
    "help": dict(press=["question_mark"]),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("case", sorted(CASES))
def test_screen_snapshot(snap_compare, case, size):
    assert snap_compare(app(), terminal_size=size, **CASES[case])


def test_no_stale_snapshots():
    """syrupy's own unused-snapshot check is off under pytest-xdist (and with -k): this one is not."""
    live = {f"test_screen_snapshot[{case}-{w}x{h}].svg" for case in CASES for w, h in SIZES}
    check_no_stale(Path(__file__).parent / "__snapshots__" / "test_snapshots", "*.svg", live)

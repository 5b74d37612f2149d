"""Pilot tests: drive the app with key presses against the recorded runs and fixture
workloads, and check what the panels say (figures against ``steady_state``)."""

from __future__ import annotations

import json

import pytest
from textual.command import CommandPalette
from textual.widgets import DataTable, OptionList, Static
from tui_fixtures import STORE, WORKLOADS, recorded
from tui_screen import screen_text, wait_for

from accelctl.analysis import throughput
from accelctl.analysis.stats import steady_state
from accelctl.contract.events import read_events
from accelctl.tui import fmt
from accelctl.tui.app import AccelctlApp
from accelctl.tui.screens.compare import CompareScreen
from accelctl.tui.screens.dialogs import PickScreen
from accelctl.tui.screens.help import HelpScreen
from accelctl.tui.screens.plan import PlanScreen
from accelctl.tui.screens.run import RunScreen
from accelctl.tui.screens.runs import RunsScreen

pytestmark = pytest.mark.asyncio


def make_app() -> AccelctlApp:
    return AccelctlApp(WORKLOADS, runs_root=STORE)


def text_of(app, selector: str) -> str:
    """The rendered text of one widget (what it shows, markup removed)."""
    widget = app.screen.query_one(selector)
    # a Static shows what it was updated with; the model panels render from their model
    rendered = widget.content if type(widget) is Static else widget.render()
    if isinstance(rendered, str):
        return rendered
    from io import StringIO

    from rich.console import Console

    console = Console(width=max(widget.size.width, 40), file=StringIO(), color_system=None)
    console.print(rendered)
    return console.file.getvalue()


async def open_run(pilot, run_name: str) -> RunScreen:
    """Runs view, cursor on the run, Enter, wait for the replay to end."""
    app = pilot.app
    await pilot.press("4")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, RunsScreen)
    row = [r.id for r in screen.records].index(recorded(run_name).name)
    for _ in range(row):
        await pilot.press("down")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.summary is not None,
                   what="the replay")
    return app.screen


# ------------------------------------------------------------------ workloads and plan


async def test_workloads_lists_files_with_validation_state_and_inline_diagnostics():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        files = app.screen.query_one("#wl-files", OptionList)
        labels = [str(files.get_option_at_index(i).prompt) for i in range(files.option_count)]
        assert labels == ["✗ broken.wl 3 err", "✓ tiny.wl"]
        # the first valid file is selected, with its (workload, target) pairs
        targets = app.screen.query_one("#wl-targets", OptionList)
        assert [str(targets.get_option_at_index(i).prompt) for i in range(targets.option_count)] == [
            "tui_train › cpu", "tui_train › cpu2", "tui_generate › cpu", "tui_ddp › cpu"]
        assert (app.selection.workload, app.selection.target) == ("tui_train", "cpu")
        await pilot.press("up")  # the broken file: diagnostics under their lines
        await pilot.pause()
        src = text_of(app, "#wl-source")
        assert "max_new_token = 8 tokens" in src
        # the caret under the key, the message on a line of its own (it wraps at the panel's width)
        lines = src.splitlines()
        at = next(i for i, ln in enumerate(lines) if "max_new_token = 8 tokens" in ln)
        assert lines[at + 1].rstrip().endswith("^^^^^^^^^^^^^")
        assert "error[E202]: unknown key 'max_new_token' in task generate" in lines[at + 2]
        assert "hint: did you mean 'max_new_tokens'?" in src
        assert "error[E203]: unknown precision 'bf61'" in src
        assert app.screen.query_one("#wl-source-box").border_title == "broken.wl · 3 error(s)"
        assert targets.option_count == 0


async def test_plan_view_shows_the_selected_targets_plan_notes_and_a_diff():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        plan = text_of(app, "#plan-text")
        assert "# plan: workload tui_train -> target cpu" in plan
        assert "# launch worker (1 process(es))" in plan
        assert "memory per device" in text_of(app, "#plan-notes")
        await pilot.press("d")  # two targets: diff against the other one at once
        await pilot.pause()
        diff = text_of(app, "#plan-text")
        assert "--- plan cpu" in diff and "+++ plan cpu2" in diff
        assert "-#   note: 1 process, 1 thread(s)" in diff and "+#   note: 1 process, 2 thread(s)" in diff
        await pilot.press("escape")
        await pilot.pause()
        assert "# plan: workload tui_train -> target cpu" in text_of(app, "#plan-text")


async def test_switch_target_picks_another_target_and_the_plan_follows():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2", "t")
        await pilot.pause()
        assert isinstance(app.screen, PickScreen)
        await pilot.press("down", "enter")
        await pilot.pause()
        await pilot.pause()
        assert app.selection.target == "cpu2"
        assert "# plan: workload tui_train -> target cpu2" in text_of(app, "#plan-text")
        assert "tui_train › cpu2" in screen_text(app).splitlines()[0]


# ------------------------------------------------------------------ replayed runs


async def test_replayed_training_run_fills_every_panel():
    run = recorded("tui_train-cpu-")
    stats = steady_state(read_events(run / "events.jsonl"))
    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await open_run(pilot, "tui_train-cpu-")
        assert screen.model.status == "ok"
        panel = " ".join(text_of(app, "#run-stats").split())
        assert f"median {fmt.ms(stats.step_time.median)}" in panel
        assert f"p90 {fmt.ms(stats.step_time.p90)}" in panel
        assert "warm-up 2 excluded" in panel
        # the one throughput (median of the measured steps), labelled as every surface labels it
        assert f"sequences/s {throughput.number(stats.samples_per_s.median)}" in panel
        assert "MFU" in panel and "memory" in panel and "loss" in panel
        assert "10/10 steps · ok" in text_of(app, "#run-progress")
        assert "warm-up: 2 excluded" in screen.query_one("#plot-step").border_title
        assert screen.query_one("#plot-second").border_title.startswith("loss")
        summary = text_of(app, "#run-summary")
        assert "status ok" in summary and "loss 5.506 → 5.056 (decreased)" in summary
        shown = screen_text(app)
        assert "step time (ms)" in shown and "tui_train › cpu" in shown
        await pilot.press("l")  # the worker's log instead of the summary
        await pilot.pause()
        assert "# accelctl: launch worker: python -m accelctl.worker" in text_of(app, "#run-log")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)


async def test_replayed_generation_run_shows_per_token_latency_instead_of_loss():
    run = recorded("tui_generate-cpu-")
    gen = steady_state(read_events(run / "events.jsonl")).generation
    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await open_run(pilot, "tui_generate-cpu-")
        panel = text_of(app, "#run-stats")
        assert f"tokens/s  {fmt.num(gen.tokens_per_s_median)}" in panel
        assert f"per token {fmt.ms(gen.per_token_median_s, 2)}" in panel
        assert "loss" not in panel
        assert screen.query_one("#plot-second").border_title.startswith("per-token latency (ms)")
        assert "generation" in text_of(app, "#run-summary")


async def test_replayed_ddp_run_shows_per_rank_times_and_the_straggler():
    run = recorded("tui_ddp-cpu-")
    per_rank = steady_state(read_events(run / "events.jsonl")).per_rank
    slow = max(per_rank, key=lambda r: per_rank[r].median)
    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await open_run(pilot, "tui_ddp-cpu-")
        title = screen.query_one("#run-ranks").border_title
        assert title.startswith(f"ranks · straggler {slow} +")
        ranks = text_of(app, "#run-ranks")
        for d in per_rank.values():
            assert fmt.ms(d.median) in ranks
        assert f"{slow}◀" in ranks
        assert "2 ranks" in text_of(app, "#run-header")


# ------------------------------------------------------------------ runs and compare


async def test_runs_table_marks_two_runs_and_compares_them():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        assert table.row_count == 4
        ids = [r.id for r in app.screen.records]
        a, b = ids.index(recorded("tui_train-cpu2-").name), ids.index(recorded("tui_train-cpu-").name)
        for _ in range(a):
            await pilot.press("down")
        await pilot.press("space")
        for _ in range(b - a):
            await pilot.press("down")
        await pilot.press("space", "c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        # the speed-up is `accelctl compare`'s: the runs' median step time per sample, A / B;
        # one run a side is no verdict, and the screen says how many runs are needed
        def per_sample(k):
            events = read_events(recorded(k) / "events.jsonl")
            first = next(e for e in events if getattr(e, "phase", None) == "measure" and getattr(e, "samples", 0))
            return steady_state(events).step_time.median / first.samples

        speedup = per_sample("tui_train-cpu2-") / per_sample("tui_train-cpu-")
        cmp = app.screen.cmp
        assert cmp.speedup == pytest.approx(speedup) and cmp.speedup_ci is None
        verdict = text_of(app, "#cmp-verdict")
        assert f"B is {fmt.ratio(speedup)} faster than A by per-run median time per sample" in verdict
        assert "inconclusive (A: 1 run(s), B: 1): too few independent runs for a verdict: A has 1, B has 1; " \
               "3 of each are needed" in " ".join(verdict.split())
        assert not any(v in verdict for v in ("no significant difference", "improvement", "regression"))
        assert cmp.verdict == "inconclusive"
        # prices from each run's spec.json: cpu2 0.25 usd/h, cpu 0.10 usd/h
        assert cmp.a.price_per_hour == 0.25 and cmp.b.price_per_hour == 0.10
        assert cmp.price_performance == pytest.approx(speedup * 0.25 / 0.10)
        assert f"B gets {fmt.ratio(cmp.price_performance)} more sequences per dollar" in verdict
        assert "$0.2500/h" in text_of(app, "#cmp-a") and "$0.1000/h" in text_of(app, "#cmp-b")
        await pilot.press("s")  # swap A and B
        await pilot.pause()
        assert app.screen.cmp.speedup == pytest.approx(1 / speedup)
        assert f"B is {fmt.ratio(speedup)} slower than A by per-run median time per sample" in text_of(app, "#cmp-verdict")
        assert "fewer sequences per dollar" in text_of(app, "#cmp-verdict")


async def test_compare_without_prices_says_so(tmp_path):
    import shutil

    for name in ("tui_generate-cpu-", "tui_ddp-cpu-"):
        shutil.copytree(recorded(name), tmp_path / recorded(name).name)
    app = AccelctlApp(WORKLOADS, runs_root=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4", "space", "down", "c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        # two workloads: refused as `accelctl compare` refuses them (E227), no figure of B
        # against A (issue 26 #4: it printed "speed-up B is 1.93× faster") until f forces it
        verdict = text_of(app, "#cmp-verdict")
        assert "not compared" in verdict and "[E227] different workloads" in verdict
        assert "speed-up" not in verdict and "faster" not in verdict and "slower" not in verdict
        assert "price-performance" not in verdict and "×" not in verdict
        assert "press f to compare them anyway" in verdict
        await pilot.press("f")
        await pilot.pause()
        verdict = text_of(app, "#cmp-verdict")
        assert "FORCED past [E227] different workloads" in verdict and "B is " in verdict
        assert "price-performance: -" in verdict and "no price known" in verdict
        assert "inconclusive" in verdict and "no significant difference" not in verdict


async def test_broken_runs_are_listed_with_their_reason_and_not_compared(tmp_path):
    """Issue 11 #7: a run whose summary.json is a directory and one whose summary is cut
    short are listed as `unreadable: <reason>` (not `incomplete`, not a crash); comparing
    one is refused with the reason (as `accelctl compare` refuses it); replaying one ends
    with that status."""
    import os
    import shutil

    names = ("tui_train-cpu-", "tui_train-cpu2-", "tui_generate-cpu-")
    for name in names:
        shutil.copytree(recorded(name), tmp_path / recorded(name).name)
    as_dir = tmp_path / recorded("tui_train-cpu2-").name / "summary.json"
    as_dir.unlink()
    as_dir.mkdir()
    cut = tmp_path / recorded("tui_generate-cpu-").name / "summary.json"
    cut.write_bytes(cut.read_bytes()[:200])
    app = AccelctlApp(WORKLOADS, runs_root=tmp_path)
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.press("4")
        await pilot.pause()
        screen = app.screen
        status = {r.id: r.status for r in screen.records}
        assert status[as_dir.parent.name] == "unreadable: summary.json is a directory"
        assert status[cut.parent.name].startswith("unreadable: summary.json is truncated")
        table = screen.query_one(DataTable)
        cells = {r.id: str(table.get_cell(r.id, "status")) for r in screen.records}
        assert cells == status
        shown = screen_text(app)
        assert "unreadable: summary.json is a directory" in shown and "incomplete" not in shown
        row = [r.id for r in screen.records].index(as_dir.parent.name)
        for _ in range(row):
            await pilot.press("down")
        await pilot.pause()
        assert "unreadable: summary.json is a directory" in text_of(app, "#runs-detail")
        # mark the broken run as A, the good one as B, compare
        good = [r.id for r in screen.records].index(recorded("tui_train-cpu-").name)
        await pilot.press("space", *(["down"] * (good - row) if good > row else ["up"] * (row - good)), "space", "c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        verdict = text_of(app, "#cmp-verdict")
        assert verdict.startswith("not compared") and "speed-up" not in verdict
        assert f"[E226] A ({as_dir.parent.name}) is unreadable: summary.json is a directory" in verdict.replace("\n", "")
        await pilot.press("escape")
        await pilot.pause()
        # replay the broken run: it ends, with its reason
        for _ in range(good - row if good > row else 0):
            await pilot.press("up")
        for _ in range(row - good if row > good else 0):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and not app.screen.model.live,
                       what="the replay of the broken run")
        assert app.screen.model.status == "unreadable: summary.json is a directory"


async def test_compare_key_outside_runs_view_goes_there():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)


# ------------------------------------------------------------------ help, palette, footer, quit


async def test_help_screen_and_command_palette():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "stop the live run" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Show Runs")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the Runs view")


async def test_footer_names_the_keys_at_80x24():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        footer = screen_text(app).splitlines()[-1]
        for label in ("r Run", "x Stop", "t Target", "c Compare", "? Help", "q Quit", "palette"):
            assert label in footer, (label, footer)


async def test_quit_without_a_live_run_exits_at_once():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_run_store_rows_come_from_summary_json():
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        await pilot.pause()
        shown = screen_text(app)
        for run in STORE.iterdir():
            summary = json.loads((run / "summary.json").read_text())
            med = summary["stats"]["step_time"]["median"]
            assert fmt.ms(med) in shown
        assert "run store · 4 run(s) in tests/tui/fixtures/store" in shown

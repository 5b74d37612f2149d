"""The parts under the screens, without Textual's event loop: the feed (replay at full
speed, paced, followed), the run model, the workspace scan and comparison, highlighting."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest
from tui_fixtures import STORE, WORKLOADS, recorded

from accelctl.analysis.stats import steady_state
from accelctl.contract.events import read_events
from accelctl.tui.feed import ReplaySource, pump
from accelctl.tui.highlight import highlight_workload, source_with_diagnostics
from accelctl.tui.messages import RunEnded, RunEvents
from accelctl.tui.model import RunModel
from accelctl.tui.workspace import compare, make_plan, plan_diff, run_side, scan


def drain(source, timeout: float = 10.0):
    posted = []
    deadline = time.monotonic() + timeout
    pump(source, posted.append, 1, lambda: time.monotonic() > deadline)
    return posted


def test_full_speed_replay_posts_every_event_in_order_then_the_summary():
    run = recorded("tui_ddp-cpu-")
    posted = drain(ReplaySource(run))
    events = [e for m in posted if isinstance(m, RunEvents) for e in m.events]
    assert [e.to_dict() for e in events] == [e.to_dict() for e in read_events(run / "events.jsonl")]
    end = posted[-1]
    assert isinstance(end, RunEnded) and end.status == "ok" and end.summary["run_id"] == run.name


def test_paced_replay_keeps_the_recorded_rhythm():
    run = recorded("tui_train-cpu-")
    events = read_events(run / "events.jsonl")
    steps = [e for e in events if e.kind == "step"]
    span = steps[-1].time_unix_s - steps[0].time_unix_s  # ~0.1 s of steps (setup gaps are capped)
    source = ReplaySource(run, speed=1.0)
    t0 = time.monotonic()
    posted = drain(source, timeout=30)
    took = time.monotonic() - t0
    assert sum(len(m.events) for m in posted if isinstance(m, RunEvents)) == len(events)
    assert all(len(m.events) == 1 for m in posted if isinstance(m, RunEvents))
    assert took >= span * 0.9


def test_following_a_run_that_is_still_being_written(tmp_path):
    src = recorded("tui_train-cpu-")
    run = tmp_path / src.name
    run.mkdir()
    shutil.copy(src / "plan.json", run / "plan.json")
    lines = (src / "events.jsonl").read_text().splitlines(keepends=True)

    def writer():
        with open(run / "events.jsonl", "w") as fh:
            for line in lines:
                half = len(line) // 2  # torn writes: the reader must wait for the newline
                fh.write(line[:half])
                fh.flush()
                time.sleep(0.005)
                fh.write(line[half:])
                fh.flush()
        time.sleep(0.2)
        shutil.copy(src / "summary.json", run / "summary.json")

    (run / "events.jsonl").touch()
    source = ReplaySource(run)
    assert source.follow
    t = threading.Thread(target=writer)
    t.start()
    posted = drain(source, timeout=20)
    t.join()
    assert sum(len(m.events) for m in posted if isinstance(m, RunEvents)) == len(lines)
    assert posted[-1].status == "ok"


def test_a_run_without_summary_and_not_followed_is_incomplete(tmp_path):
    src = recorded("tui_train-cpu-")
    run = tmp_path / src.name
    shutil.copytree(src, run)
    (run / "summary.json").unlink()
    posted = drain(ReplaySource(run, follow=False))
    assert posted[-1].status == "incomplete" and posted[-1].summary is None


def test_model_figures_are_steady_state_over_the_events_warmup_excluded():
    run = recorded("tui_ddp-cpu-")
    events = read_events(run / "events.jsonl")
    model = RunModel(total_steps=10)
    model.extend(events[: len(events) // 2])
    half = len(model.rank0)
    assert 0 < half < 10 and model.live
    p = model.progress()
    assert p.done == half and p.total == 10 and p.eta_s is not None and p.eta_s > 0
    model.extend(events[len(events) // 2:])
    model.end("ok", json.loads((run / "summary.json").read_text()))
    want = steady_state(events)
    assert model.stats().step_time == want.step_time
    assert model.stats().per_rank == want.per_rank
    assert model.stats().warmup_steps == 2
    assert model.progress().done == 10 and not model.live
    warm, meas = model.series("step_time_s", 1)
    assert len(warm) == 2 and len(meas) == 8
    # the current step is the straggler's time of the latest step
    last = [e for e in events if e.kind == "step"][-2:]
    assert model.current_step_s == max(e.step_time_s for e in last)


def test_workspace_scan_states_and_plans():
    files = {wf.path.name: wf for wf in scan(WORKLOADS)}
    assert files["broken.wl"].state == "errors" and files["broken.wl"].errors == 3
    assert files["tiny.wl"].state == "ok"
    spec = files["tiny.wl"].spec("tui_train")
    a, b = make_plan(spec, "cpu"), make_plan(spec, "cpu2")
    assert a.plan.target == "cpu" and "# plan: workload tui_train -> target cpu" in a.text
    diff = plan_diff(a, b, "cpu", "cpu2")
    assert diff.startswith("--- plan cpu\n+++ plan cpu2")
    assert make_plan(spec, "nope").error


def test_comparison_is_accelctl_compare_with_spec_prices():
    """The TUI's comparison is `accelctl compare`'s: the same speed-up, CI and verdict."""
    from accelctl.analysis.compare import BASIS_RUNS, INCONCLUSIVE
    from accelctl.report.compare import compare as report_compare
    from accelctl.report.entry import entry_from_series
    from accelctl.run.store import read_run, series_runs

    a, b = read_run(recorded("tui_train-cpu2-")), read_run(recorded("tui_train-cpu-"))
    cmp = compare(a, b)
    want = report_compare(*(entry_from_series(series_runs(r)) for r in (a, b)))
    assert (cmp.speedup, cmp.speedup_ci, cmp.verdict) == (want.speedup, want.speedup_ci, want.verdict)
    assert cmp.price_performance == want.price_performance
    # one run each: the speed-up is the ratio of the runs' median step times per sample
    # (no interval: one process a side says nothing of the run-to-run noise)
    def per_sample(run):
        first = next(e for e in run.events() if getattr(e, "phase", None) == "measure" and getattr(e, "samples", 0))
        return steady_state(run.events()).step_time.median / first.samples

    thr_b = steady_state(b.events()).samples_per_s.median  # the one throughput: the median of the steps
    assert cmp.result.basis == BASIS_RUNS and cmp.speedup == pytest.approx(per_sample(a) / per_sample(b))
    assert cmp.speedup_ci is None and cmp.verdict == INCONCLUSIVE and "3 of each are needed" in cmp.result.reason
    assert (cmp.a.price_per_hour, cmp.b.price_per_hour) == (0.25, 0.10)
    assert cmp.b.cost_per_million == pytest.approx(0.10 / 3600 / thr_b * 1e6)
    assert cmp.price_performance == pytest.approx(cmp.speedup * 0.25 / 0.10)
    assert run_side(read_run(recorded("tui_generate-cpu-"))).price_per_hour is None


def test_workload_highlighting_and_inline_diagnostics():
    text = highlight_workload('target cpu { devices = 2  price = 0.10 usd/h }  # a "comment"')
    styles = {text.plain[s.start:s.end]: str(s.style) for s in text.spans}
    assert "target" in styles and "devices" in styles and "0.10 usd/h" in styles
    assert styles['# a "comment"'].startswith("italic")
    wf = next(w for w in scan(WORKLOADS) if w.path.name == "broken.wl")
    out = source_with_diagnostics(wf.text, wf.diags).plain.splitlines()
    i = next(n for n, line in enumerate(out) if "precision bf61" in line)
    assert out[i + 1].endswith("^^^^ error[E203]: unknown precision 'bf61'")
    assert out[i + 1].index("^") == out[i].index("bf61")
    assert "hint: did you mean 'bf16'?" in out[i + 2]


def test_store_fixture_is_small_and_machine_independent():
    total = sum(f.stat().st_size for f in STORE.rglob("*") if f.is_file())
    assert total < 100_000
    for f in STORE.rglob("*"):
        if f.is_file():
            assert "/tmp/" not in f.read_text() and "/work/" not in f.read_text(), f


def test_the_summary_panel_says_what_ran_and_marks_a_rehearsal():
    from accelctl.tui.widgets.stats import summary_lines

    ran = {"model": {"family": "vit", "params": 114250, "scale": "stand_in", "weights_source": "random init",
                     "architecture": {"layers": 2, "hidden": 64}},
           "data": {"source": "files:/d/pairs.csv", "format": "csv", "split": "train", "records": 24},
           "rehearsal": {"of": "p5_fp8", "device": "h100", "world_size": 8}}
    lines = [t.plain for t in summary_lines({"status": "ok", "what_ran": ran})]
    assert lines[1].startswith("REHEARSAL of target p5_fp8 (8 x h100) on this CPU with the stand-in vit(layers=2")
    assert "114 k params" in lines[1]
    assert lines[2] == "data: files:/d/pairs.csv (format csv, split train) · 24 records, 24 on rank 0"
    ran["rehearsal"], ran["model"]["scale"] = None, "real"
    assert [t.plain for t in summary_lines({"status": "ok", "what_ran": ran})][1].startswith("model vit(")

"""The TUI attached (in a pseudo terminal, its output read as a terminal would) vs
``accelctl run --headless``, on the small causal-LM loop of ``bench/tui_overhead.py``:
does watching a run slow it?  Arm a is the TUI, arm b headless."""

from __future__ import annotations

import time
from pathlib import Path

from bench.harness import Comparison, Setup
from bench.tui_overhead import WORKLOAD, median_step_s, run_headless, run_pty


def _setup(quick: bool, workdir: Path) -> Setup:
    wl = workdir / "tui_overhead.wl"
    wl.write_text(WORKLOAD.format(steps=20 if quick else 200))
    runs = {"a": workdir / "runs-tui", "b": workdir / "runs-headless"}
    for r in runs.values():
        r.mkdir()

    def measured(fn, key):
        def arm(core):
            if core is not None:  # the helpers start their own processes, unpinned
                raise RuntimeError("tui_attached runs interleaved only")
            t0 = time.perf_counter()
            run = fn(wl, runs[key], 600.0)
            return {"step_s": median_step_s(run), "wall_s": time.perf_counter() - t0}
        return arm

    return Setup(a=measured(lambda w, r, t: run_pty(w, r, t, (80, 24)), "a"),
                 b=measured(run_headless, "b"),
                 a_label="accelctl TUI in an 80x24 pty", b_label="accelctl run --headless",
                 metrics={"step_s": "median measured step", "wall_s": "whole run"}, pinnable=False)


COMPARISON = Comparison(name="tui_attached", title="TUI attached vs headless (small GPT-2 loop)",
                        setup=_setup, pairs=4, quick_pairs=2)

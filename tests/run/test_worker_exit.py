"""The worker ends with ``os._exit`` once its events are written: no interpreter shutdown
(1.2 s of it after the last event here, measured for issue 12) -- on the single-process path
too, where no barrier precedes it.  Observed without timing: an ``atexit`` handler registered
in the worker's process never runs, while the events file is complete."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_worker import ROOT, assert_ok, make_job

from accelctl.contract.events import read_events
from accelctl.workload.types import MeasureSpec, TaskSpec

GPT2 = {"layers": 1, "hidden": 32, "heads": 2, "vocab": 300, "max_positions": 64}

# the worker as `python -m accelctl.worker JOB` runs it (runpy, as __main__), after an atexit
# handler that leaves a marker file if the interpreter shuts down normally
_RUN_WITH_ATEXIT_MARKER = (
    "import atexit, pathlib, runpy, sys\n"
    "marker = pathlib.Path(sys.argv[2])\n"
    "atexit.register(marker.write_text, 'interpreter shutdown ran')\n"
    "sys.argv = ['accelctl.worker', sys.argv[1]]\n"
    "runpy.run_module('accelctl.worker', run_name='__main__', alter_sys=True)\n"
)


@pytest.mark.slow
def test_single_process_worker_exits_without_interpreter_shutdown(tmp_path):
    job = make_job(tmp_path, "gpt2", TaskSpec(kind="generate", prompt="hi", max_new_tokens=2), config=GPT2,
                   measure=MeasureSpec(warmup=0, steps=1))
    marker = tmp_path / "atexit-ran"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _RUN_WITH_ATEXIT_MARKER, str(job), str(marker)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    events = read_events(tmp_path / "events" / "rank0.jsonl")
    assert_ok(proc.returncode, events)
    assert not marker.exists(), "the worker returned into interpreter shutdown instead of os._exit"

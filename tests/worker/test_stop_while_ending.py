"""A stop that lands while the worker records how its job ended: rank 0 still ends with one
clear record -- its own failure when it had one, else the stop -- never with nothing.

The race (issue 25): a 2-rank run whose loss goes NaN; rank 1 dies of it first, torchrun
SIGTERMs rank 0 while rank 0 is writing its own ``nan_loss`` event; the SIGTERM's
KeyboardInterrupt, raised inside the worker's ``except NonFiniteLoss`` clause, left it by the
side (a handler's exception is not caught by its sibling ``except KeyboardInterrupt``): exit
130, no end event, nothing in its log -- a silent rank.  The same for a crash's traceback, and
for the runner's SIGTERM while the event of its own SIGINT was being written.

``signal_at.py`` runs the real worker on a real tiny job and sends the signal at that exact
moment (a real signal, only its moment chosen); each job imports torch and transformers (~5-8 s
of one core), so the module runs its workers up front, two at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from accelctl.contract.events import RunFailed, RunFinished, StepMetrics, read_events
from accelctl.contract.job import DebugJob, DeviceJob, WorkerJob
from accelctl.contract.ids import WORKER_EXCEPTION, WORKER_NAN, WORKER_OK, WORKER_STOPPED
from accelctl.workload.types import BatchSpec, DatasetSpec, MeasureSpec, ModelSpec, OptimizerSpec, PrecisionSpec, TaskSpec

ROOT = Path(__file__).resolve().parents[2]
VIT = {"layers": 1, "hidden": 32, "heads": 4, "mlp_ratio": 2.0, "image_size": 32, "patch": 8, "classes": 10}


def vit_job(folder: Path, **kw) -> Path:
    shape = kw.pop("shape", VIT)
    job = WorkerJob(run_id=folder.name, workload="test", target="cpu", backend="cpu", device=DeviceJob(),
                    task=TaskSpec(kind="pretrain"), model=ModelSpec(family="vit", source="arch", stand_in=shape,
                                                                    weights="random"),
                    architecture=shape, scale="stand_in", data=DatasetSpec(image_size=32, classes=10),
                    precision=PrecisionSpec(), optimizer=OptimizerSpec(), measure=MeasureSpec(warmup=1, steps=3),
                    batch=BatchSpec(micro=2), threads=1, events_dir=str(folder / "events"), **kw)
    (folder / "job.json").write_text(job.to_json(), encoding="utf-8")
    return folder / "job.json"


#: case -> (the moment, the job)
CASES = {
    "nan_loss": ("failure-record", lambda f: vit_job(f, debug=DebugJob(inject_nan_at_step=2))),
    "crash": ("traceback", lambda f: vit_job(f, shape={**VIT, "heads": 5})),  # 32 is no multiple of 5 heads
    "finished": ("finished-record", lambda f: vit_job(f)),
    "stopped": ("stop-record", lambda f: vit_job(f)),
}


def run(case: str, folder: Path) -> tuple[int, list, str]:
    when, make = CASES[case]
    job = make(folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "worker" / "signal_at.py"), when, str(job)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    events_file = folder / "events" / "rank0.jsonl"
    return proc.returncode, read_events(events_file) if events_file.exists() else [], proc.stderr


@pytest.fixture(scope="module")
def ended(tmp_path_factory):
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {case: pool.submit(run, case, tmp_path_factory.mktemp(case)) for case in CASES}
        yield {case: fut.result for case, fut in futures.items()}


def the_record(rc: int, events: list, stderr: str, when: str):
    """The one end event of rank 0 (RunFinished or RunFailed), after the signal was sent."""
    assert f"at {when}" in stderr, stderr[-3000:]  # the signal was sent at that moment
    ends = [e for e in events if isinstance(e, (RunFinished, RunFailed))]
    assert len(ends) == 1, (rc, ends, stderr[-3000:])
    return ends[0]


@pytest.mark.slow
def test_a_stop_as_the_nan_loss_is_written_keeps_the_nan_loss(ended):
    rc, events, stderr = ended["nan_loss"]()
    failed = the_record(rc, events, stderr, "failure-record")
    assert (rc, failed.reason, failed.step) == (WORKER_NAN, "nan_loss", 2)
    assert [s.step for s in events if isinstance(s, StepMetrics)] == [1]


@pytest.mark.slow
def test_a_stop_as_a_crash_is_formatted_keeps_the_crash(ended):
    rc, events, stderr = ended["crash"]()
    failed = the_record(rc, events, stderr, "traceback")
    assert (rc, failed.reason) == (WORKER_EXCEPTION, "exception")
    assert "divisible by num_heads" in failed.message and "Traceback" in failed.traceback


@pytest.mark.slow
def test_a_stop_as_the_run_finishes_keeps_the_finish(ended):
    rc, events, stderr = ended["finished"]()
    finished = the_record(rc, events, stderr, "finished-record")
    assert rc == WORKER_OK and isinstance(finished, RunFinished) and finished.steps == 4


@pytest.mark.slow
def test_a_second_stop_as_the_first_is_written_keeps_the_stop(ended):
    rc, events, stderr = ended["stopped"]()
    failed = the_record(rc, events, stderr, "stop-record")
    assert (rc, failed.reason, failed.message) == (WORKER_STOPPED, "stopped", "stopped (SIGINT)")

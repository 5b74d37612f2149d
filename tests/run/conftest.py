"""Plans for runner and store tests: real subprocesses running ``fake_worker.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.contract.job import DebugJob, DeviceJob, WorkerJob
from accelctl.contract.plan import Launch, Plan
from accelctl.workload.types import DatasetSpec, MeasureSpec, ModelSpec, OptimizerSpec, PrecisionSpec, TaskSpec

FAKE_WORKER = str(Path(__file__).with_name("fake_worker.py"))


def make_job(options=None, *, warmup=2, steps=4, repeat=2, task="pretrain", model=None, data=None) -> WorkerJob:
    return WorkerJob(
        run_id="",
        workload="tiny",
        target="cpu",
        backend="cpu",
        device=DeviceJob(),
        task=TaskSpec(kind=task),
        model=(model := model or ModelSpec(family="gpt2", source="arch", stand_in={"layers": 1})),
        architecture=dict(model.stand_in),
        data=data or DatasetSpec(),
        precision=PrecisionSpec(),
        optimizer=OptimizerSpec(),
        measure=MeasureSpec(warmup=warmup, steps=steps, repeat=repeat),
        debug=DebugJob(fake=dict(options or {})),
    )


def make_plan(mode="ok", *, options=None, launches=None, files=(), **measure) -> Plan:
    opts = {"fake": mode, **(options or {})}
    if launches is None:
        launches = (Launch(name="worker", argv=("python", FAKE_WORKER, "{run_dir}/job.json")),)
    return Plan(
        workload="tiny",
        target="cpu",
        backend="cpu",
        engine="local",
        device="cpu",
        launches=tuple(launches),
        files=tuple(files),
        job=make_job(opts, **measure),
        warnings=("a plan warning",),
    )


@pytest.fixture
def runs(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "runs"
    monkeypatch.setenv("ACCELCTL_RUNS_DIR", str(root))
    return root


@pytest.fixture(name="make_plan")
def _make_plan_fixture():
    return make_plan


@pytest.fixture(name="make_job")
def _make_job_fixture():
    return make_job


@pytest.fixture
def fake_worker() -> str:
    return FAKE_WORKER

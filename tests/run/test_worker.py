"""The worker as the runner starts it: a real subprocess per job, events read back from JSONL.

Every job uses the tiny stand-in shapes, one intra-op thread and few steps, so each run is
dominated by interpreter + torch/transformers import time (~5-8 s of one core).  The module
fixture ``runs`` starts the workers of all selected tests up front, two at a time, and each
test waits for its own: on 2 cores that halves the file's wall time.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from accelctl.contract.events import RunFailed, RunFinished, RunStarted, StepMetrics, read_events
from accelctl.contract.job import DebugJob, DeviceJob, WorkerJob
from accelctl.workload.types import BatchSpec, DatasetSpec, MeasureSpec, ModelSpec, OptimizerSpec, PrecisionSpec, TaskSpec

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "DeepSpeed is a machine learning framework"


def make_job(tmp: Path, family: str, task: TaskSpec, **kw) -> Path:
    job = WorkerJob(
        run_id=f"test-{family}-{task.kind}", workload="test", target="cpu", backend="cpu", device=DeviceJob(),
        task=task, model=ModelSpec(family=family, source="arch", stand_in=(shape := kw.pop("config", {})),
                                   weights="random"),
        architecture=shape, scale="stand_in",
        batch=BatchSpec(micro=kw.pop("micro_batch", 1), accumulation=kw.pop("accumulation", 1)),
        data=kw.pop("data", DatasetSpec()), precision=PrecisionSpec(dtype=kw.pop("dtype", "fp32")),
        optimizer=kw.pop("optimizer", OptimizerSpec()), measure=kw.pop("measure", MeasureSpec(warmup=1, steps=5)),
        threads=1, events_dir=str(tmp / "events"), **kw)
    path = tmp / "job.json"
    path.write_text(job.to_json(), encoding="utf-8")
    return path


def run_worker(job_path: Path, nproc: int = 1, timeout: float = 120) -> tuple[int, dict[int, list]]:
    """Run the worker (under torchrun when nproc > 1); return its exit code and events per rank."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if nproc == 1:
        cmd = [sys.executable, "-m", "accelctl.worker", str(job_path)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "accelctl.worker", str(job_path)]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    events_dir = Path(json.loads(job_path.read_text())["events_dir"])
    events = {r: read_events(events_dir / f"rank{r}.jsonl") for r in range(nproc)
              if (events_dir / f"rank{r}.jsonl").exists()}
    if proc.returncode not in (0, 3):
        print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n")
    return proc.returncode, events


def of(events: list, cls) -> list:
    return [e for e in events if isinstance(e, cls)]


def assert_ok(rc: int, events: list) -> RunFinished:
    failed = of(events, RunFailed)
    assert rc == 0 and not failed, failed[0].traceback if failed else f"exit code {rc}"
    assert len(of(events, RunStarted)) == 1
    (finished,) = of(events, RunFinished)
    return finished


# -- the jobs, one per test (``test_<name>`` waits for ``JOBS[<name>]``) ------------------------

def bloom_generate_100_tokens(tmp: Path) -> tuple[Path, int]:
    task = TaskSpec(kind="generate", prompt=PROMPT, max_new_tokens=100, kv_cache=True)
    return make_job(tmp, "bloom", task, measure=MeasureSpec(warmup=1, steps=3)), 1


def bert_pretrain_loss_decreases(tmp: Path) -> tuple[Path, int]:
    return make_job(tmp, "bert", TaskSpec(kind="pretrain"), data=DatasetSpec(seq_len=64), micro_batch=8,
                    measure=MeasureSpec(warmup=2, steps=20)), 1


def t5_finetune_gradient_checkpointing(tmp: Path) -> tuple[Path, int]:
    return make_job(tmp, "t5", TaskSpec(kind="finetune"), data=DatasetSpec(seq_len=32, target_len=8), micro_batch=4,
                    accumulation=2, gradient_checkpointing=True, measure=MeasureSpec(warmup=1, steps=6)), 1


def vit_pretrain(tmp: Path) -> tuple[Path, int]:
    return make_job(tmp, "vit", TaskSpec(kind="pretrain"), micro_batch=16,
                    optimizer=OptimizerSpec(name="sgd", lr=0.05, momentum=0.9, grad_clip=1.0),
                    measure=MeasureSpec(warmup=2, steps=10, repeat=2)), 1


def stable_diffusion_infer(tmp: Path) -> tuple[Path, int]:
    task = TaskSpec(kind="infer", inference_steps=3, guidance_scale=7.5)
    return make_job(tmp, "stable_diffusion", task, micro_batch=2, measure=MeasureSpec(warmup=2, steps=2)), 1


def nan_loss_exits_3(tmp: Path) -> tuple[Path, int]:
    return make_job(tmp, "vit", TaskSpec(kind="pretrain"), micro_batch=4, debug=DebugJob(inject_nan_at_step=3)), 1


def two_ranks_ddp_all_reduces(tmp: Path) -> tuple[Path, int]:
    return make_job(tmp, "vit", TaskSpec(kind="pretrain"), micro_batch=4, debug=DebugJob(report_param_checksum=True),
                    measure=MeasureSpec(warmup=1, steps=4)), 2


JOBS = {f.__name__: f for f in (two_ranks_ddp_all_reduces, stable_diffusion_infer, bloom_generate_100_tokens,
                                bert_pretrain_loss_decreases, t5_finetune_gradient_checkpointing, vit_pretrain,
                                nan_loss_exits_3)}


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    selected = {item.name.removeprefix("test_") for item in request.session.items}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(lambda n=name, b=build: run_worker(*b(tmp_path_factory.mktemp(n))))
                   for name, build in JOBS.items() if name in selected}
        yield {name: fut.result for name, fut in futures.items()}


# -- the tests --------------------------------------------------------------------------------

@pytest.mark.slow
def test_bloom_generate_100_tokens(runs):
    rc, events = runs["bloom_generate_100_tokens"]()
    finished = assert_ok(rc, events[0])
    steps = of(events[0], StepMetrics)
    assert [s.phase for s in steps] == ["warmup", "measure", "measure", "measure"]
    for s in steps:
        assert s.new_tokens == 100 and s.tokens == 100 and s.loss is None
        assert 0 < s.ttft_s < s.step_time_s and 0 < s.per_token_s < s.step_time_s
        assert s.tokens_per_s == pytest.approx(100 / s.step_time_s)
        assert s.mem_bytes > 0
    started = of(events[0], RunStarted)[0]
    assert started.details["weights"] == "random" and started.details["scale"] == "stand_in"
    assert started.details["prompt_tokens"] == len(PROMPT.encode())
    assert started.env["cpu_has_native_bf16"] in (True, False)
    # greedy generation reports no MFU, so the worker probes no matmul peak for it
    assert "peak_flops_measured" not in started.env and started.env["peak_flops_source"].startswith("none")
    assert finished.results["new_tokens"] == 100


@pytest.mark.slow
def test_bert_pretrain_loss_decreases(runs):
    rc, events = runs["bert_pretrain_loss_decreases"]()
    assert_ok(rc, events[0])
    steps = of(events[0], StepMetrics)
    losses = [s.loss for s in steps]
    assert len(losses) == 22 and all(math.isfinite(x) for x in losses)
    assert statistics.fmean(losses[-5:]) < statistics.fmean(losses[:5]), losses
    measured = [s for s in steps if s.phase == "measure"]
    assert all(s.samples == 8 and s.tokens == 8 * 64 and s.mfu > 0 for s in measured)


@pytest.mark.slow
def test_t5_finetune_gradient_checkpointing(runs):
    rc, events = runs["t5_finetune_gradient_checkpointing"]()
    finished = assert_ok(rc, events[0])
    started = of(events[0], RunStarted)[0]
    assert started.details["gradient_checkpointing"] is True and started.details["global_batch"] == 8
    steps = of(events[0], StepMetrics)
    assert len(steps) == 7 and all(s.samples == 8 and s.tokens == 8 * 40 for s in steps)
    assert all(math.isfinite(s.loss) for s in steps)
    assert finished.results["flops_per_step"] > 0


@pytest.mark.slow
def test_vit_pretrain(runs):
    rc, events = runs["vit_pretrain"]()
    assert_ok(rc, events[0])
    steps = of(events[0], StepMetrics)
    assert [(s.phase, s.repeat) for s in steps] == [("warmup", 0)] * 2 + [("measure", 0)] * 10 + [("measure", 1)] * 10
    losses = [s.loss for s in steps]
    assert statistics.fmean(losses[-5:]) < statistics.fmean(losses[:5]), losses
    assert all(s.mfu and s.samples_per_s > 0 and s.tokens_per_s is None for s in steps)


def test_stable_diffusion_infer(runs):
    rc, events = runs["stable_diffusion_infer"]()
    finished = assert_ok(rc, events[0])
    steps = of(events[0], StepMetrics)
    assert [s.phase for s in steps] == ["warmup", "warmup", "measure", "measure"]
    assert all(s.samples == 2 and s.step_time_s > 0 for s in steps)
    assert finished.results["image_shape"] == [2, 3, 64, 64]


@pytest.mark.slow
def test_nan_loss_exits_3(runs):
    rc, events = runs["nan_loss_exits_3"]()
    assert rc == 3
    (failed,) = of(events[0], RunFailed)
    assert failed.reason == "nan_loss" and failed.step == 3
    assert [s.step for s in of(events[0], StepMetrics)] == [1, 2]
    assert not of(events[0], RunFinished)


def test_two_ranks_ddp_all_reduces(runs):
    rc, events = runs["two_ranks_ddp_all_reduces"]()
    results = [assert_ok(rc, events[r]).results for r in (0, 1)]
    assert [of(events[r], RunStarted)[0].world_size for r in (0, 1)] == [2, 2]
    # different shards ...
    assert results[0]["data_checksum"] != results[1]["data_checksum"]
    # ... yet identical weights after training (and not the initial ones): gradients were all-reduced
    assert results[0]["param_checksum"] == pytest.approx(results[1]["param_checksum"], rel=1e-12, abs=1e-9)
    assert results[0]["param_checksum"] != results[0]["param_checksum_start"]
    assert all(s.samples == 8 for s in of(events[0], StepMetrics))  # global: micro 4 x 2 ranks

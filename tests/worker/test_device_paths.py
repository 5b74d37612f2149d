"""Worker paths the device check (issue 21) takes on the H100, run here on the CPU through the
same code: FP8 through torchao's float8 training (emulated on the host), and DDP with its
process group at world size 1 under torchrun (``parallel = ddp`` on one device)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.contract.events import LogMessage, RunFailed, RunFinished, RunStarted, StepMetrics, read_events
from accelctl.contract.job import DeviceJob, WorkerJob
from accelctl.workload.types import (
    BatchSpec,
    DatasetSpec,
    Fp8Recipe,
    MeasureSpec,
    ModelSpec,
    OptimizerSpec,
    ParallelSpec,
    PrecisionSpec,
    TaskSpec,
)

#: each test starts two real worker processes (~10-25 s each on the 2-core lab machine)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VIT = {"layers": 2, "hidden": 64, "heads": 4, "mlp_ratio": 4.0, "image_size": 32, "patch": 8, "classes": 10}


def worker_events(tmp: Path, name: str, precision: PrecisionSpec, launcher: list[str],
                  parallel: ParallelSpec = ParallelSpec()) -> list:
    """The events of one tiny ViT training job, its worker started by ``launcher``."""
    folder = tmp / name
    folder.mkdir()
    job = WorkerJob(run_id=name, workload="test", target="cpu", backend="cpu", device=DeviceJob(),
                    task=TaskSpec(kind="pretrain", objective="classification"),
                    model=ModelSpec(family="vit", source="arch", stand_in=VIT, weights="random"),
                    architecture=VIT, scale="stand_in", data=DatasetSpec(image_size=32, classes=10),
                    precision=precision, optimizer=OptimizerSpec(), parallel=parallel,
                    measure=MeasureSpec(warmup=1, steps=3), batch=BatchSpec(micro=16), threads=1,
                    events_dir=str(folder / "events"))
    (folder / "job.json").write_text(job.to_json(), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, *launcher, "-m", "accelctl.worker", str(folder / "job.json")], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    events = read_events(folder / "events" / "rank0.jsonl")
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert proc.returncode == 0 and not failed, (failed[0].traceback if failed else proc.stderr[-3000:])
    assert [e for e in events if isinstance(e, RunFinished)]
    return events


def test_torchao_float8_trains_the_vit_with_its_linears_in_fp8(tmp_path):
    fp8 = PrecisionSpec(dtype="fp8", fp8=Fp8Recipe(library="torchao"))
    events = worker_events(tmp_path, "fp8", fp8, [])
    said = [e.message for e in events if isinstance(e, LogMessage) and "torchao float8" in e.message]
    # 2 blocks x (qkv, proj, fc1, fc2) in FP8; the 10-class head (10 not a multiple of 16) kept
    assert said and "8 linear layer(s) in FP8" in said[0] and "emulated" in said[0] and "head" in said[0]
    losses = [e.loss for e in events if isinstance(e, StepMetrics)]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)
    # the same model and batches in bf16 autocast: FP8 with dynamic scales stays close at step 1
    bf16 = [e.loss for e in worker_events(tmp_path, "bf16", PrecisionSpec(dtype="bf16"), [])
            if isinstance(e, StepMetrics)]
    assert abs(losses[0] - bf16[0]) < 0.05 * abs(bf16[0])


def test_ddp_on_one_device_joins_its_process_group_under_torchrun(tmp_path):
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=1"]
    events = worker_events(tmp_path, "ddp1", PrecisionSpec(), torchrun, ParallelSpec(strategy="data"))
    (started,) = [e for e in events if isinstance(e, RunStarted)]
    assert started.world_size == 1 and "dist_init_s" in started.details["setup_s"]
    # the same job without ddp joins no group
    plain = worker_events(tmp_path, "plain", PrecisionSpec(), torchrun)
    (started,) = [e for e in plain if isinstance(e, RunStarted)]
    assert "dist_init_s" not in started.details["setup_s"]

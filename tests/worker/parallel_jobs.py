"""Shared by the parallel tests: tiny stand-ins of each family, the jobs that run them, and the
single-process reference loop they are compared with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from accelctl.contract.events import RunFailed, StepMetrics, read_events
from accelctl.contract.job import DeviceJob, WorkerJob
from accelctl.workload.types import (
    BatchSpec,
    DatasetSpec,
    MeasureSpec,
    ModelSpec,
    OptimizerSpec,
    ParallelSpec,
    PrecisionSpec,
    TaskSpec,
)

ROOT = Path(__file__).resolve().parents[2]
#: 4 layers, 4 heads: tp and pp up to 4; dropout 0 so a curve does not depend on the RNG streams
SHAPES = {
    "llama": {"layers": 4, "hidden": 64, "heads": 4, "ffn": 96, "vocab": 256, "max_positions": 128},
    "gpt2": {"layers": 4, "hidden": 64, "heads": 4, "vocab": 256, "max_positions": 128, "dropout": 0.0},
    "bert": {"layers": 4, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 256, "max_positions": 128, "dropout": 0.0},
}
SHAPES_PLANNED_ONLY = {
    "vit": {"layers": 2, "hidden": 64, "heads": 4, "mlp_ratio": 4.0, "image_size": 32, "patch": 8, "classes": 10},
    # llama's kin share its plan (spec.parallel_plans): their own classes must have its module names
    "mistral": {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 96, "vocab": 256, "max_positions": 128},
    "qwen2": {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 96, "vocab": 256, "max_positions": 128},
}
OBJECTIVE = {"llama": "causal_lm", "gpt2": "causal_lm", "bert": "mlm", "vit": "classification",
             "mistral": "causal_lm", "qwen2": "causal_lm"}


#: SGD with momentum: the update is proportional to the gradient, so two correct runs that sum in
#: another order stay a rounding apart.  Adam's first steps move each weight by about lr·sign(g):
#: a weight whose true gradient is ~0 takes its sign from rounding, and correct runs drift apart
#: (measured: llama FSDP × TP with AdamW lr 1e-3, 5e-7 at step 2, 2.5e-5 at step 4)
SGD = OptimizerSpec(name="sgd", lr=0.05, momentum=0.9, grad_clip=1.0)
ADAMW = OptimizerSpec(name="adamw", lr=1e-3, grad_clip=1.0)


def job(family: str, parallel: ParallelSpec, folder: Path, steps: int = 3, optimizer: OptimizerSpec = SGD) -> WorkerJob:
    shape = SHAPES.get(family) or SHAPES_PLANNED_ONLY[family]
    return WorkerJob(
        run_id=folder.name, workload="parallel", target="cpu", backend="torchrun", device=DeviceJob(),
        task=TaskSpec(kind="pretrain", objective=OBJECTIVE[family]),
        model=ModelSpec(family=family, source="arch", stand_in=shape, weights="random"), architecture=shape,
        scale="stand_in", data=DatasetSpec(seq_len=16, image_size=32, classes=10), precision=PrecisionSpec(),
        optimizer=optimizer, measure=MeasureSpec(warmup=1, steps=steps),
        batch=BatchSpec(micro=2, accumulation=2), parallel=parallel,
        strategy="plain" if parallel.strategy in ("none", "data") else "sharded", threads=1,
        events_dir=str(folder / "events"))


def run_ranks(j: WorkerJob, folder: Path, ranks: int) -> list[float]:
    """The loss curve of ``j`` run by ``ranks`` worker processes under torchrun (gloo)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.json").write_text(j.to_json(), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
            "-m", "accelctl.worker", str(folder / "job.json")]
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    events = [e for r in range(ranks) for e in read_events(folder / "events" / f"rank{r}.jsonl")]
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert proc.returncode == 0 and not failed, (failed[0].traceback if failed else proc.stderr[-3000:])
    curves = {r: [e.loss for e in read_events(folder / "events" / f"rank{r}.jsonl") if isinstance(e, StepMetrics)]
              for r in range(ranks)}
    assert all(c == curves[0] for c in curves.values()), curves  # every rank logs the global loss
    return curves[0]


def reference(j: WorkerJob, dp: int) -> list[float]:
    """The same training in this one process: the model the worker builds, each step's
    micro-batches of all ``dp`` data shards (the global batch), the loss their mean, torch's
    own AdamW and clip_grad_norm_."""
    from accelctl.worker import data, models
    from accelctl.worker.train_loop import forward_loss

    log = lambda level, msg: None  # noqa: E731
    built = models.build(j, log)
    model = built.model.train()
    o = j.optimizer
    opt = (torch.optim.SGD(model.parameters(), lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)
           if o.name == "sgd" else torch.optim.AdamW(model.parameters(), lr=o.lr, weight_decay=o.weight_decay))
    streams = [data.training_batches(j, built, r, dp, log) for r in range(dp)]
    out = []
    for _ in range(j.measure.warmup + j.measure.steps):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(j.batch.accumulation):
            loss = sum(forward_loss(model, built.kind, next(s)) for s in streams) / dp
            (loss / j.batch.accumulation).backward()
            total += float(loss.detach())
        if j.optimizer.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), j.optimizer.grad_clip)
        opt.step()
        out.append(total / j.batch.accumulation)
    return out

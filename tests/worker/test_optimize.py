"""``optimize { compile, channels_last }`` and ``kv_cache = static`` in the real worker.

The slow tests run the worker as the runner starts it (a subprocess per job, tiny stand-ins,
one thread) twice from the same seed -- eager, and with the option -- and compare what they
computed: the training loss curve step by step, the generated tokens.  Inductor compiles in
C++ on a CPU: the first run on a machine compiles for minutes (~1.5-3 min for both jobs on
the loaded 2-core lab machine), later runs hit its cache in /tmp/torchinductor_$USER.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from accelctl.contract.events import RunFailed, RunFinished, StepMetrics, read_events
from accelctl.contract.job import DeviceJob, WorkerJob
from accelctl.workload.types import (
    BatchSpec,
    DatasetSpec,
    MeasureSpec,
    ModelSpec,
    OptimizerSpec,
    OptimizeSpec,
    PrecisionSpec,
    TaskSpec,
)
from accelctl.worker import optimize

ROOT = Path(__file__).resolve().parents[2]
VIT = {"layers": 2, "hidden": 64, "heads": 4, "mlp_ratio": 4.0, "image_size": 32, "patch": 8, "classes": 10}
GPT2 = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 1000, "max_positions": 128}


def run_job(tmp: Path, name: str, family: str, shape: dict, task: TaskSpec, opt: OptimizeSpec,
            measure: MeasureSpec) -> tuple[list[StepMetrics], RunFinished]:
    folder = tmp / name
    folder.mkdir()
    job = WorkerJob(run_id=name, workload="test", target="cpu", backend="cpu", device=DeviceJob(), task=task,
                    model=ModelSpec(family=family, source="arch", stand_in=shape, weights="random"),
                    architecture=shape, scale="stand_in", data=DatasetSpec(image_size=32, classes=10, seq_len=32),
                    precision=PrecisionSpec(), optimizer=OptimizerSpec(),
                    measure=measure, batch=BatchSpec(micro=4), optimize=opt, threads=1,
                    events_dir=str(folder / "events"))
    (folder / "job.json").write_text(job.to_json(), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "accelctl.worker", str(folder / "job.json")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    events = read_events(folder / "events" / "rank0.jsonl")
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert proc.returncode == 0 and not failed, (failed[0].traceback if failed else proc.stderr[-3000:])
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    return [e for e in events if isinstance(e, StepMetrics)], finished


def test_channels_last_converts_conv_weights_and_image_inputs():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 2))
    seen = []
    model[0].register_forward_pre_hook(lambda m, args: seen.append(args[0].is_contiguous(
        memory_format=torch.channels_last)))
    job = type("Job", (), {"optimize": OptimizeSpec(channels_last=True), "task": TaskSpec(kind="pretrain")})()
    out = optimize.apply(model, job, lambda level, msg: None)
    assert out is model and model[0].weight.is_contiguous(memory_format=torch.channels_last)
    model(torch.randn(2, 3, 8, 8))  # an NCHW tensor in
    assert seen == [True]


@pytest.mark.slow
def test_compiled_channels_last_training_follows_the_eager_loss_curve(tmp_path):
    task, measure = TaskSpec(kind="pretrain", objective="classification"), MeasureSpec(warmup=2, steps=4)
    eager, _ = run_job(tmp_path, "eager", "vit", VIT, task, OptimizeSpec(), measure)
    compiled, done = run_job(tmp_path, "compiled", "vit", VIT, task,
                             OptimizeSpec(compile=True, channels_last=True), measure)
    assert [s.step for s in compiled] == [s.step for s in eager] == list(range(1, 7))
    # inductor fuses and reorders fp32 arithmetic: the same curve within rounding, not bit for bit
    assert [s.loss for s in compiled] == pytest.approx([s.loss for s in eager], rel=1e-3)
    r = done.results
    assert r["compiles"] >= 1 and r["compile_s"] > 0
    assert r["warmup_compiles"] == r["compiles"] and r["recompiles"] == 0  # all in warm-up, none measured
    # the measured steps did not compile: each far shorter than the compilation
    assert max(s.step_time_s for s in compiled if s.phase == "measure") < r["compile_s"] / 4


@pytest.mark.slow
def test_compiled_training_with_dropout_on_a_cpu_draws_the_eager_masks(tmp_path):
    """GPT-2's stand-in has dropout 0.1 (embeddings, attention, residuals): compiled for the host
    CPU, inductor draws the masks with aten's generator (``fallback_random``), so the loss curve
    is the eager one within rounding -- with inductor's own RNG the masks, and the losses, differ."""
    task, measure = TaskSpec(kind="pretrain", objective="causal_lm"), MeasureSpec(warmup=2, steps=3)
    eager, _ = run_job(tmp_path, "eager", "gpt2", GPT2, task, OptimizeSpec(), measure)
    compiled, done = run_job(tmp_path, "compiled", "gpt2", GPT2, task, OptimizeSpec(compile=True), measure)
    assert done.results["compiles"] >= 1
    assert [s.loss for s in compiled] == pytest.approx([s.loss for s in eager], rel=1e-3)


@pytest.mark.slow
def test_static_kv_cache_with_compiled_decoding_generates_the_dynamic_cache_tokens(tmp_path):
    measure = MeasureSpec(warmup=2, steps=2)

    def task(layout: str) -> TaskSpec:
        return TaskSpec(kind="generate", prompt="Hello, accelerators", max_new_tokens=12, kv_cache=True,
                        kv_cache_layout=layout)

    _, dynamic = run_job(tmp_path, "dynamic", "gpt2", GPT2, task("dynamic"), OptimizeSpec(), measure)
    steps, static = run_job(tmp_path, "static", "gpt2", GPT2, task("static"), OptimizeSpec(compile=True), measure)
    assert static.results["sample_ids"] == dynamic.results["sample_ids"] and len(static.results["sample_ids"]) == 12
    assert "compiles" not in dynamic.results  # eager: nothing compiled
    assert static.results["compiles"] >= 1 and static.results["compile_s"] > 0
    # a static cache keeps the decoding step's shapes: every graph compiled in the warm-up calls
    assert static.results["warmup_compiles"] == static.results["compiles"] and static.results["recompiles"] == 0
    assert all(s.new_tokens == 12 for s in steps)
    started = json.loads((tmp_path / "static" / "events" / "rank0.jsonl").read_text().splitlines()[1])
    assert started["details"]["kv_cache_layout"] == "static"

"""Seed 004's Neuron target rehearsed for real on torch-xla's CPU device, in ``.venv-xla``.

``accelctl.backends.xla_neuron.cpu_rehearsal`` turns the Neuron plan of
``workloads/vit_neuron.wl``'s ``inf2_xlarge`` target into a job for the worker's ``xla``
adapter on ``PJRT_DEVICE=CPU`` (stand-in ViT, the plan's loader workers, its environment
where it applies, a compile cache directory).  The worker runs as
``.venv-xla/bin/python -m accelctl.worker JOB.json`` -- torch 2.9.0 + torch-xla 2.9.0, built by
``scripts/setup-xla.sh`` (``scripts/setup.sh --test`` runs it, so CI has it); without that venv
these tests skip and say so.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from accelctl import api
from accelctl.backends.xla_neuron import check as xla_check
from accelctl.backends.xla_neuron.cpu_rehearsal import rehearsal, xla_python, xla_venv
from accelctl.contract.envnames import DEBUG_RAGGED_BATCH_EVERY
from accelctl.contract.events import event_from_dict
from accelctl.run.viewers.console import ConsoleSink
from accelctl.workload.types import MeasureSpec
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
XLA_PY = xla_python()
needs_xla = pytest.mark.skipif(XLA_PY is None, reason=f"no complete {xla_venv()}: scripts/setup-xla.sh "
                               "makes it (scripts/setup.sh --test runs it; CI does)")
TARGET = "inf2_xlarge"
#: warm-up covers the compiles (forward/backward, the optimizer's first step and its next ones)
MEASURE = MeasureSpec(warmup=4, steps=12, repeat=1)


def plans():
    (spec,) = api.load(ROOT / "workloads" / "vit_neuron.wl")
    return api.plan(spec, TARGET), api.plan(spec, TARGET, rehearse=True)


def run_worker(tmp_path: Path, **extra_env) -> tuple[subprocess.CompletedProcess, list[dict], object]:
    neuron, stand_in = plans()
    job, env = rehearsal(neuron, stand_in.job, tmp_path)
    job = replace(job, measure=MEASURE)
    path = tmp_path / "job.json"
    path.write_text(job.to_json())
    base = {k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR", "LANG") if k in os.environ}
    proc = subprocess.run([str(XLA_PY), "-m", "accelctl.worker", str(path)], env={**base, **env, **extra_env}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    events_file = tmp_path / "events" / "rank0.jsonl"
    events = [json.loads(line) for line in events_file.read_text().splitlines()] if events_file.exists() else []
    return proc, events, job


def finished(proc, events) -> dict:
    done = [e for e in events if e["kind"] == "run_finished"]
    assert proc.returncode == 0 and done, (proc.returncode, proc.stderr[-3000:], events[-3:])
    return done[0]["results"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    return run_worker(tmp_path_factory.mktemp("xla_shipped"))


@pytest.fixture(scope="module")
def ragged(tmp_path_factory):
    # every 6th batch half as big: an epoch's ragged last batch that a loader kept
    return run_worker(tmp_path_factory.mktemp("xla_ragged"), **{DEBUG_RAGGED_BATCH_EVERY: "6"})


def test_rehearsal_keeps_the_neuron_device_path_and_env():
    neuron, stand_in = plans()
    job, env = rehearsal(neuron, stand_in.job, "/tmp/x")
    assert job.device == replace(neuron.job.device, precompile=False)
    assert job.device.adapter != stand_in.job.device.adapter  # xla, not the host's eager adapter
    assert env["PJRT_DEVICE"] == "CPU" and "NEURON_CC_FLAGS" not in env
    assert env["ACCELCTL_DATALOADER_WORKERS"] == neuron.launches[-1].env["ACCELCTL_DATALOADER_WORKERS"] == "2"
    assert env["XLA_PERSISTENT_CACHE_PATH"] == "/tmp/x/xla-compile-cache"
    assert job.rehearsal_of == TARGET and job.model == stand_in.job.model


@pytest.mark.slow
@needs_xla
def test_shipped_workload_trains_on_xla_cpu_and_compiles_only_in_warmup(shipped):
    proc, events, job = shipped
    results = finished(proc, events)
    started = next(e for e in events if e["kind"] == "run_started")
    assert started["details"]["adapter"] == "xla" and started["env"]["device"].startswith("xla:")
    assert "MpDeviceLoader, 2 loader workers" in started["details"]["data"]
    steps = [e for e in events if e["kind"] == "step"]
    assert len(steps) == MEASURE.warmup + MEASURE.steps
    losses = [s["loss"] for s in steps]
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4, losses  # learnable synthetic images
    # compilation reported apart: counted and timed by torch-xla, all of it before the measured phase
    assert results["compiles"] >= 2 and results["compile_s"] > 0
    assert results["warmup_compiles"] == results["compiles"] and results["recompiles"] == 0
    measured = sorted(s["step_time_s"] for s in steps if s["phase"] == "measure")
    assert results["compile_s"] > 2 * measured[len(measured) // 2]  # a compile costs more than a steady step
    assert not [e for e in events if e["kind"] == "log" and "recompilation" in e["message"]]
    assert list((Path(proc.args[-1]).parent / "xla-compile-cache").iterdir())  # the cache directory is written
    out = io.StringIO()
    sink = ConsoleSink(job, headless=True, file=out)
    for e in events:
        sink.on_event(event_from_dict(e))
    assert f"compiled {results['compiles']} graph(s) in" in out.getvalue()
    assert "measured phase 0 recompilation(s)" in out.getvalue()


@pytest.mark.slow
@needs_xla
def test_ragged_last_batch_recompiles_in_the_measured_phase_with_a_warning(ragged):
    proc, events, job = ragged
    results = finished(proc, events)
    assert results["recompiles"] > 0 and results["recompile_s"] > 0
    warnings = [e for e in events if e["kind"] == "log" and e["level"] == "warning" and "recompilation" in e["message"]]
    assert warnings, [e for e in events if e["kind"] == "log"]
    m, side = job.batch.micro, job.model.stand_in["image_size"]
    assert (f"batch shape changed: pixel_values ({m}, 3, {side}, {side}) -> ({m // 2}, 3, {side}, {side})"
            in warnings[0]["message"]), warnings[0]["message"]
    # the console prints it
    out = io.StringIO()
    sink = ConsoleSink(job, headless=True, file=out)
    for e in events:
        sink.on_event(event_from_dict(e))
    assert "warning: recompilation in the measured phase" in out.getvalue()
    assert f"measured phase {results['recompiles']} recompilation(s)" in out.getvalue()


@pytest.mark.slow
@needs_xla
def test_check_imports_the_workers_names_in_the_installed_torch_xla():
    neuron, _ = plans()
    (spec,) = api.load(ROOT / "workloads" / "vit_neuron.wl")
    results = api.check_plan(neuron, spec)
    installed = [r for r in results if r.tool.startswith("installed torch-xla")]
    assert len(installed) == 1 and installed[0].ok is True, installed
    assert "installed torch-xla 2.9.0" in installed[0].tool
    # and a name the installed torch-xla lacks is rejected
    bad = xla_check.installed_result({"torch_xla.core.xla_model.optimizer_stepp"}, "2.9")
    assert bad.ok is False and "optimizer_stepp" in bad.messages[0]


def test_check_is_not_run_without_the_venv(tmp_path):
    result = xla_check.installed_result({"torch_xla.core.xla_model.optimizer_step"}, "2.9",
                                        python=tmp_path / "no-venv" / "bin" / "python")
    assert result.ok is None and "setup-xla.sh" in result.messages[0]

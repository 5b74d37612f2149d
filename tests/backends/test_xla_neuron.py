"""xla_neuron plans (seed 004) and their check against torch's and torch-xla's own source.

torch-xla 2.9 needs exactly torch 2.9.0 (a 4 GB download), so it is not installed: its source
is read instead.  ``accelctl/backends/xla_neuron/data/torch_xla-2.9.0.json`` (shipped: ``accelctl
plan --check`` reads it too) is the table ``accelctl.backends.xla_neuron.check`` built from the
v2.9.0 tag of github:pytorch/xla (commit in the file); with ``ACCELCTL_TORCH_XLA_SOURCE=GIT_DIR@v2.9.0``
(or a wheel, or a site-packages folder) the table is rebuilt from that source and compared.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest
from backend_plans import load_spec, plan_with

from accelctl.backends.xla_neuron import backend as xla_neuron
from accelctl.backends.xla_neuron import check as xla_check
from accelctl.backends.xla_neuron.backend import XlaNeuronBackend
from accelctl.backends.xla_neuron.cpu_rehearsal import xla_python
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Plan
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
TABLE_PATH = ROOT / "accelctl" / "backends" / "xla_neuron" / "data" / "torch_xla-2.9.0.json"
TABLE_COMMIT = "5fab7053df86c8d503b98d9e7202ca8b8d4978c7"  # pytorch/xla tag v2.9.0
WORKER_XLA_FILES = [ROOT / "accelctl" / "worker" / "xla_extras.py", ROOT / "accelctl" / "worker" / "devices.py"]

# seed 004: timm ViT (default shape), random data, batch 16, Adam, XLA device, MpDeviceLoader,
# xm.optimizer_step, process group 'xla', torchrun --nproc_per_node=<cores>, workers by vCPUs,
# steps 11..500 averaged (XLA_USE_BF16=1 in the seed: bf16 is autocast here, see the notes)
SEED_004 = """
workload vit_neuron {
  task pretrain
  model vit(image_size = 224, patch = 16, classes = 1000)
  optimizer adam(lr = 0.001)
  batch { micro = 16 }
  precision bf16
  measure { warmup = 10 steps  steps = 490 steps }
  target trn1     { instance = trn1.2xlarge }
  target inf2     { instance = inf2.xlarge }
  target inf2_big { instance = inf2.48xlarge  neuron_parallel_compile = on }
  target trn1_pc  { instance = trn1.2xlarge  neuron_parallel_compile = on }
  target trn1_w   { instance = trn1.2xlarge  dataloader_workers = 6 }
  target trn1_bare { device = trn1  devices = 2 }
}
"""


@pytest.fixture(scope="module")
def spec():
    return load_spec(SEED_004)


@pytest.fixture(scope="module")
def table():
    return json.loads(TABLE_PATH.read_text())


def plan(spec, name) -> Plan:
    return plan_with(XlaNeuronBackend(), spec, name)


# -- plans ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target,cores,workers", [("trn1", 2, 4), ("inf2", 2, 2), ("inf2_big", 24, 8),
                                                  ("trn1_w", 2, 6), ("trn1_bare", 2, 2)])
def test_one_process_per_neuroncore_and_workers_by_vcpus(spec, target, cores, workers):
    p = plan(spec, target)
    run = p.launches[-1]
    assert run.name == "torchrun" and run.processes == cores and not run.wait
    assert run.argv == ("torchrun", "--standalone", "--nnodes=1", f"--nproc_per_node={cores}",
                        "-m", "accelctl.worker", "{run_dir}/job.json")
    assert run.env["ACCELCTL_DATALOADER_WORKERS"] == str(workers)
    assert run.env["PJRT_DEVICE"] == "NEURON" and p.job.device.comm == "xla"
    assert p.job.batch.micro == 16 and p.job.backend == "xla_neuron" and p.job.optimizer.name == "adam"


def test_bf16_is_autocast_not_xla_use_bf16(spec):
    p = plan(spec, "trn1")
    env = p.launches[-1].env
    assert "XLA_USE_BF16" not in env and "XLA_DOWNCAST_BF16" not in env
    assert env["NEURON_CC_FLAGS"] == "--auto-cast=none" and p.job.precision.dtype == "bf16"
    notes = " ".join(p.notes)
    assert "torch.autocast('xla', dtype=bfloat16)" in notes
    assert "deliberately not seed 004's XLA_USE_BF16=1" in notes and "deprecated after torch-xla 2.6" in notes
    assert "4 data-loader workers per process (trn1.2xlarge: 8 vCPUs / 2 processes = 4, at most 8)" in notes


def test_precompile_runs_first_on_a_short_copy_of_the_job(spec):
    p = plan(spec, "inf2_big")
    pre, run = p.launches
    assert pre.name == "precompile" and pre.wait and pre.processes == 24
    assert pre.argv[:2] == ("neuron_parallel_compile", "torchrun")
    assert pre.argv[2:-1] == run.argv[1:-1] and pre.argv[-1] == "{run_dir}/job_precompile.json"
    assert pre.env["NEURON_COMPILE_CACHE_URL"] == run.env["NEURON_COMPILE_CACHE_URL"]  # same cache
    assert "NEURON_PARALLEL_COMPILE_MAX_RETRIES" not in pre.env  # 192 vCPUs
    (f,) = p.files
    short = WorkerJob.from_dict(json.loads(f.content))
    assert (short.measure.warmup, short.measure.steps, short.measure.repeat) == (2, 2, 1)
    assert short.device.precompile is True and short.events_dir == ""
    # everything but the step counts is the measured job's: the same graphs get compiled
    assert short.batch.micro == p.job.batch.micro and short.model == p.job.model and short.precision == p.job.precision
    small = plan(spec, "trn1_pc").launches[0]
    assert small.env["NEURON_PARALLEL_COMPILE_MAX_RETRIES"] == "1"  # the Neuron docs' advice for trn1.2xlarge
    assert len(plan(spec, "trn1").launches) == 1


def test_plan_round_trips_through_json(spec):
    p = plan(spec, "inf2_big")
    assert Plan.from_dict(json.loads(p.to_json())) == p


@pytest.mark.parametrize("target", ["trn1", "inf2", "inf2_big"])
def test_torchrun_commands_parse_with_torchs_own_parser(spec, target):
    from torch.distributed.run import get_args_parser

    for launch in plan(spec, target).launches:
        head = 2 if launch.argv[0] == "neuron_parallel_compile" else 1
        assert launch.argv[head - 1] == "torchrun"
        args = get_args_parser().parse_args(list(launch.argv[head:]))
        assert int(args.nproc_per_node) == launch.processes and args.module and args.standalone
        assert args.training_script == "accelctl.worker"
        assert args.training_script_args[0].startswith("{run_dir}/job")


def test_fp16_and_cuda_targets_are_not_xla_neuron(spec):

    t = spec.target("trn1")
    fp16 = replace(t, precision=replace(t.precision, dtype="fp16"))
    assert any("does not run fp16" in r.hint for r in XlaNeuronBackend().unsupported(spec, fp16))
    gpu = replace(t, device="h100")
    assert not XlaNeuronBackend().selects(spec, gpu)


def test_xla_neuron_is_registered_and_selected(spec):
    from accelctl.api import plan as api_plan
    from accelctl.plan.registry import BACKENDS

    assert "xla_neuron" in BACKENDS, "xla_neuron is missing from the plug-in table (accelctl.plan.registry.BACKENDS)"
    assert api_plan(spec, "inf2").backend == "xla_neuron"


# -- against torch-xla 2.9's source (the stored table) --------------------------------------


def test_table_is_torch_xla_2_9_from_its_release_tag(table):
    assert table["torch_xla"] == "2.9.0" and TABLE_COMMIT in table["source"]
    assert xla_neuron.TORCH_XLA_VERSION == ".".join(table["torch_xla"].split(".")[:2])
    assert "PJRT_DEVICE" in table["env_vars"] and "NEURON" in table["pjrt_devices"]
    assert table["dist_backends"] == ["xla"] and table["rendezvous"] == ["xla"]
    assert "after the 2.6 release" in table["deprecated_env"]["XLA_USE_BF16"]


@pytest.mark.parametrize("target", ["trn1", "inf2", "inf2_big", "trn1_pc"])
def test_environment_is_consistent_with_torch_xla_2_9(spec, table, target):
    for launch in plan(spec, target).launches:
        assert [str(f) for f in xla_check.check_env(launch.env, table, xla_neuron.FORBIDDEN_ENV)] == []


@pytest.mark.parametrize("env,expect", [
    ({"PJRT_DEVICE": "NEURON", "XLA_USE_BF16": "1"}, "XLA_USE_BF16 is deprecated in torch-xla 2.9.0"),
    ({"PJRT_DEVICE": "NEURONX"}, "PJRT_DEVICE=NEURONX"),
    ({}, "PJRT_DEVICE is not set"),
    ({"PJRT_DEVICE": "NEURON", "NEURONCORE_NUM_DEVICES": "2"}, "NEURONCORE_NUM_DEVICES must not be set"),
])
def test_environment_check_catches_mistakes(table, env, expect):
    found = [str(f) for f in xla_check.check_env(env, table, xla_neuron.FORBIDDEN_ENV)]
    assert any(expect in f for f in found), found


@pytest.mark.parametrize("path", WORKER_XLA_FILES, ids=lambda p: p.name)
def test_worker_xla_code_uses_only_torch_xla_2_9_names(table, path):
    assert [str(f) for f in xla_check.check_worker_source(path, table)] == []


@pytest.mark.parametrize("old,new,expect", [
    ('init_method="xla://"', 'init_method="pjrt://"', "rendezvous 'pjrt://' is not registered"),
    ('dist.init_process_group("xla"', 'dist.init_process_group("neuron"', "backend 'neuron' is not registered"),
    ("pl.MpDeviceLoader(", "pl.MPDeviceLoader(", "parallel_loader has no MPDeviceLoader"),
    ('met.metric_data("CompileTime")', 'met.metric_value("CompileTime")', "metrics has no metric_value"),
    ("import torch_xla.debug.metrics as met", "import torch_xla.debug.metric as met",
     "has no module torch_xla.debug.metric"),
])
def test_worker_check_catches_mistakes(tmp_path, table, old, new, expect):
    src = WORKER_XLA_FILES[0].read_text()
    assert old in src
    bad = tmp_path / "xla_extras.py"
    bad.write_text(src.replace(old, new))
    found = [str(f) for f in xla_check.check_worker_source(bad, table)]
    assert any(expect in f for f in found), found


def test_plan_check_runs_torchruns_parser_and_the_torch_xla_table(spec, table):
    from accelctl.plan.checks import check_plan

    p = plan(spec, "inf2_big")  # precompile + measured run: two torchrun commands
    results = check_plan(p, spec)
    assert [(r.tool, r.ok) for r in results[:3]] == [
        ("torchrun parser (precompile)", True), ("torchrun parser (torchrun)", True),
        (f"torch-xla 2.9.0 API table ({table['source']})", True)]
    # then the installed torch-xla of .venv-xla imports the worker's names (NOT RUN without it)
    installed = results[3]
    assert installed.ok is (True if xla_python() else None), installed
    assert xla_check.WORKER_XLA_FILES == tuple(f.name for f in WORKER_XLA_FILES)


def test_plan_check_rejects_a_deprecated_variable_in_a_launch(spec):

    from accelctl.plan.checks import check_plan

    p = plan(spec, "trn1")
    run = p.launches[-1]
    bad = replace(p, launches=(replace(run, env={**run.env, "XLA_USE_BF16": "1"}),))
    (parser, api, _installed) = check_plan(bad, spec)
    assert parser.ok is True and api.ok is False
    assert any("XLA_USE_BF16 is deprecated in torch-xla 2.9.0" in m for m in api.messages)


def test_plan_check_without_a_table_for_the_version_is_not_run(spec):
    (result, *_) = xla_check.check_results(plan(spec, "trn1"), "9.99", xla_neuron.FORBIDDEN_ENV)
    assert result.ok is None and "no table for torch-xla 9.99" in result.messages[0]


def test_table_rebuilds_from_a_real_source_when_given(table):
    where = os.environ.get("ACCELCTL_TORCH_XLA_SOURCE")
    if not where and xla_python():  # the installed torch-xla of .venv-xla (scripts/setup-xla.sh)
        where = str(next(xla_python().parents[1].glob("lib/python*/site-packages")))
    if not where:
        pytest.skip("no .venv-xla; or set ACCELCTL_TORCH_XLA_SOURCE=GIT_DIR@v2.9.0 | torch_xla-2.9.0-*.whl | "
                    "site-packages dir")
    fresh = xla_check.api_table(xla_check.open_source(where))
    for key in ("modules", "env_vars", "pjrt_devices", "dist_backends", "rendezvous"):
        assert fresh[key] == table[key], key
    # an installed package (or a wheel) has no csrc/dtype.cpp: only the Python side's deprecations
    if "@" in where:
        assert fresh["deprecated_env"] == table["deprecated_env"]
    else:
        assert fresh["deprecated_env"].items() <= table["deprecated_env"].items()


# -- the worker side, without torch-xla -----------------------------------------------------


def _batches(n=None):
    import itertools

    import torch

    from accelctl.worker.data import Batches

    def gen():
        for i in itertools.count():
            yield {"pixel_values": torch.full((2, 3), float(i)), "labels": torch.tensor([i, i])}

    return Batches(gen(), 2, 0, "synthetic")


def test_host_loader_workers_keep_the_batch_order():
    from accelctl.worker.xla_extras import host_loader

    it = iter(host_loader(_batches(), 2))
    assert [int(next(it)["labels"][0]) for _ in range(6)] == [0, 1, 2, 3, 4, 5]


def test_worker_count_comes_from_the_plan(monkeypatch):
    from accelctl.contract.job import DeviceJob
    from accelctl.worker import xla_extras

    job = types.SimpleNamespace(device=DeviceJob(adapter="xla", comm="xla", dataloader_workers=6))
    monkeypatch.delenv(xla_extras.WORKERS_ENV, raising=False)
    assert xla_extras.dataloader_workers(job) == 6  # the job's, when no plan set the variable
    monkeypatch.setenv(xla_extras.WORKERS_ENV, "4")
    assert xla_extras.dataloader_workers(job) == 4  # the plan's launch environment
    monkeypatch.setenv("NEURON_EXTRACT_GRAPHS_ONLY", "1")
    assert xla_extras.extracting_graphs_only()


def test_device_loader_wraps_mpdeviceloader_and_keeps_batch_facts(monkeypatch, table):
    """With a stand-in parallel_loader whose MpDeviceLoader takes torch-xla 2.9's parameters."""
    sig = table["modules"]["torch_xla.distributed.parallel_loader"]["MpDeviceLoader"]
    seen = {}

    class MpDeviceLoader:
        def __init__(self, loader, device, **kwargs):
            assert sig["params"] == ["loader", "device"] and sig["varkw"]
            seen["device"] = device
            self.loader = loader

        def __iter__(self):
            return iter(self.loader)

    pl = types.ModuleType("torch_xla.distributed.parallel_loader")
    pl.MpDeviceLoader = MpDeviceLoader
    for name in ("torch_xla", "torch_xla.distributed"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch_xla.distributed.parallel_loader", pl)
    from accelctl.worker.xla_extras import device_loader

    out = device_loader(_batches(), "xla:0", workers=0)
    assert seen["device"] == "xla:0" and out.samples == 2 and "MpDeviceLoader, 0 loader workers" in out.source
    assert int(next(out)["labels"][0]) == 0

"""AMD Instinct MI300X on ROCm, added by its family's module alone (``accelctl.families.rocm``,
its worker adapter ``accelctl.worker.rocm``): it plans DDP and FSDP under torchrun and ZeRO
under DeepSpeed, every engine that can give a node its GPUs asks for them from its row, AWS
Batch refuses it from its row, estimates and ``pick`` price it from its datasheet and
instance, and every plan says what no check here can run for it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelctl.api import load, plan
from accelctl.contract.job import DeviceJob
from accelctl.errors import PlanError
from accelctl.families import FAMILIES
from accelctl.plan.checks import check_plan
from accelctl.catalog import DATASHEETS, DEVICES, INSTANCES, SCALE_OUT

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = """
workload mi {
  task pretrain { train_steps = 3 }
  model gpt2(layers = 2, hidden = 64)
  dataset synthetic(seq_len = 16 tokens)
  optimizer adamw(lr = 0.001)
  engine kubernetes { image = "registry.example/accelctl:rocm"  volume_claim = "runs"  volume_path = "/runs" }
  engine aws_batch { job_queue = "q"  image = "registry.example/accelctl:rocm" }
  target ddp { device = mi300x  devices = 8  precision = bf16 }
  target fsdp { device = mi300x  devices = 8  precision = bf16  parallel = fsdp }
  target zero { device = mi300x  devices = 8  precision = bf16  parallel = zero(stage = 2) }
  target nodes { instance = "BM.GPU.MI300X.8"  nodes = 2  precision = bf16 }
  target zero_nodes { instance = "BM.GPU.MI300X.8"  nodes = 2  precision = bf16  parallel = zero(stage = 3) }
}
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("rocm") / "mi.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    (one,) = load(path)
    return one


def test_the_row_and_the_catalog_come_from_the_familys_module():
    row = FAMILIES["rocm"]
    assert (row.comm, row.k8s_resource, row.slurm_gres, row.deepspeed_accelerator) == ("nccl", "amd.com/gpu", "gpu",
                                                                                         "cuda")
    assert not row.batch_gpu and not row.batch_device_files and not row.host
    assert DEVICES["mi300x"].adapter == "rocm" and DEVICES["mi300x"].memory_bytes == 192 * 10**9
    sheet = DATASHEETS["mi300x"]
    assert sheet.flops["bf16"].value == 1307.4e12 and sheet.memory_bandwidth.value == 5300e9
    assert all("MI300X" in f.source for f in (sheet.memory_bandwidth, sheet.link_bandwidth, *sheet.flops.values()))
    oci = INSTANCES["BM.GPU.MI300X.8"]
    assert (oci.device, oci.devices, oci.price_per_hour) == ("mi300x", 8, 48.00) and "$6.00 per GPU-hour" in oci.price_source
    assert "BM.GPU.MI300X.8" in SCALE_OUT


@pytest.mark.parametrize(("target", "backend", "strategy"), [("ddp", "torchrun", "plain"), ("fsdp", "torchrun", "sharded"),
                                                            ("zero", "deepspeed", "deepspeed")])
def test_ddp_and_fsdp_plan_under_torchrun_and_zero_under_deepspeed(spec, target, backend, strategy):
    p = plan(spec, target)
    assert (p.backend, p.job.strategy, p.job.device.adapter, p.job.device.comm) == (backend, strategy, "rocm", "nccl")
    assert any(n.startswith("NOT RUN here: ROCm's runtime") for n in p.notes), p.notes
    if backend == "deepspeed":
        assert p.launches[0].env["DS_ACCELERATOR"] == "cuda"


def test_plan_check_runs_the_launchers_parsers_and_says_the_runtime_is_not_run(spec):
    results = check_plan(plan(spec, "nodes"), spec)
    by_ok = {r.tool: r.ok for r in results}
    assert by_ok["torchrun parser (torchrun)"] is True
    runtime = [r for r in results if "its runtime" in r.tool]
    assert len(runtime) == 1 and runtime[0].ok is None and "no ROCm build of torch" in " ".join(runtime[0].messages)


def test_slurm_and_kubernetes_ask_for_the_gpus_by_the_rows_names(spec):
    script = next(f.content for f in plan(spec, "nodes", engine="slurm").files if f.path.endswith(".sbatch"))
    assert "#SBATCH --gres=gpu:8" in script
    manifests = json.dumps([f.content for f in plan(spec, "nodes", engine="kubernetes").files])
    assert re.search(r'amd\.com/gpu\\?"?: \\?"8', manifests) or '"amd.com/gpu": "8"' in manifests, manifests[:2000]
    assert "nvidia.com/gpu" not in manifests
    multi = plan(spec, "nodes", engine="torchrun")
    assert [launch.argv.count("--nnodes=2") for launch in multi.launches] == [1, 1]


def test_aws_batch_refuses_it_from_its_row_at_the_targets_line(spec):
    with pytest.raises(PlanError) as info:
        plan(spec, "zero_nodes", engine="aws_batch")
    (d,) = info.value.diagnostics
    assert d.code == "E546" and "no AWS instance has them" in d.message and d.span is not None


@pytest.mark.parametrize(("task", "line", "code", "words", "at"), [
    ("pretrain", "precision = fp8", "E501", "fp8 is not available on mi300x", "line"),
    # no backend at all: plan's E520 sits on the target's header, the reason of each backend in its hint
    ('generate { prompt = "hi"  max_new_tokens = 4 tokens }', "parallel = deepspeed_inference(tp = 8)", "E520",
     "backend deepspeed_inference does not drive mi300x (rocm)", "header"),
    ("pretrain", "te_layers = on", "E505", "te_layers", "line"),
])
def test_what_its_row_leaves_out_is_refused_at_its_line(task, line, code, words, at):
    from accelctl.api import validate_text

    text = (f"workload r {{\n  task {task}\n  model gpt2(layers = 2, hidden = 64)\n"
            + ("  optimizer adamw(lr = 0.001)\n" if task == "pretrain" else "")
            + f"  target t {{\n    device = mi300x\n    devices = 8\n    {line}\n  }}\n}}\n")
    diags = [d for d in validate_text(text)[1] if d.code.startswith("E")]  # E520: plan's refusal, as validate says it
    assert [d.code for d in diags] == [code], diags
    assert words in diags[0].message + (diags[0].hint or ""), diags
    lines = text.splitlines()
    assert diags[0].span.line == lines.index(f"    {line}" if at == "line" else "  target t {") + 1


def test_estimate_and_pick_price_it_from_its_datasheet_and_instance():
    import subprocess
    import sys

    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "pick", "workloads/bloomz.wl", "-w", "bloomz_7b",
                         "--work", "1e9 tokens", "--top", "1000", "--json"], cwd=ROOT, capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    rows = [r for r in json.loads(cp.stdout)["result"]["picks"] if r["instance"] == "BM.GPU.MI300X.8"]
    assert rows, "no MI300X candidate"
    for r in rows:
        nodes, devices = re.fullmatch(r"(\d+) x 8 mi300x", r["devices"]).group(1), r["devices"]
        assert r["price_per_hour"] == pytest.approx(48.0 * int(nodes)) and r["step_time_s"] > 0, (devices, r)


def test_the_worker_adapter_says_this_torch_is_not_the_rocm_build():
    import torch

    from accelctl.worker.devices import adapter_for

    if torch.version.hip is not None:
        pytest.skip("not run: this torch is the ROCm build")
    with pytest.raises(RuntimeError, match="needs PyTorch's ROCm build"):
        adapter_for(DeviceJob(kind="mi300x", adapter="rocm", comm="nccl"), 0)


def test_only_its_own_modules_and_the_families_registry_name_it():
    named = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "accelctl").rglob("*.py")
                   if re.search(r"rocm|mi300x|amd\.com", p.read_text(encoding="utf-8"), re.I))
    assert named == ["accelctl/families/__init__.py", "accelctl/families/rocm.py", "accelctl/worker/rocm.py"], named

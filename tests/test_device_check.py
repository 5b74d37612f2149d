"""The device check (issue 21, ``python -m bench.device``) where there is no GPU: its ``--dry``
mode (plans, estimates, the wheel list, the table from the recorded sample), the wheel list
against what the carried packages require, and the table's arithmetic."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.device import table, wheels
from bench.device.parts import PARTS, WORKLOADS, target_for

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "scripts" / "device-wheels.txt"
#: what the GPU machine's image has (.library KINDS.md's package list, the names that matter here)
IMAGE = {"torch", "numpy", "psutil", "msgpack", "ninja", "py-cpuinfo", "einops", "tqdm", "packaging",
         "markdown-it-py", "pygments", "nvidia-ml-py", "transformers", "timm", "scipy", "pyyaml"}


def test_dry_mode_plans_and_estimates_every_part_and_renders_the_sample(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.device", str(out), "--dry"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads((out / "device-check.json").read_text())
    assert record["kind"] == "dry"
    assert {n: p["ok"] for n, p in record["plans"].items()} == {p.name: True for p in PARTS}
    backends = {n: p["backend"] for n, p in record["plans"].items()}
    assert backends["bert_zero2"] == "deepspeed" and backends["vit_fp8"] == "torchrun"
    # every part has an estimate of the h100 target, in seconds
    assert all(table.predicted_s(record["estimate_before"][p.name]) > 0 for p in PARTS)
    assert record["wheels"]["problems"] == [] and record["wheels"]["mib"] < 64
    sample = (out / "device-check-sample.md").read_text()
    assert "SAMPLE" in sample and "not a GPU measurement" in sample
    assert len(list(out.iterdir())) <= 8  # what the device tool brings back


def test_each_part_is_a_workload_with_h100_and_h200_targets_of_one_device_and_random_weights():
    files = {p.path for p in PARTS}
    assert files == set(WORKLOADS.glob("*.wl"))
    for path in files:
        text = path.read_text()
        assert "weights  = random" in text, path
        for gpu in ("h100", "h200"):
            assert re.search(rf"target {gpu} \{{ device = {gpu}  devices = 1", text), (path, gpu)


def test_the_check_runs_the_target_of_the_gpu_it_finds():
    assert target_for("NVIDIA H200") == "h200" and target_for("NVIDIA H100 80GB HBM3") == "h100"
    assert target_for("AMD EPYC (CPU smoke, stand-in shapes)") == "h100"


def test_parts_named_run_in_the_order_named_against_the_target_chosen(tmp_path):
    """``--only`` keeps its order (what was never measured first); ``--target h200`` plans and
    estimates the h200 target, whose datasheet (4.8 TB/s) makes a bandwidth-bound decode faster."""
    def dry(*args):
        out = tmp_path / "-".join(args)
        proc = subprocess.run([sys.executable, "-m", "bench.device", str(out), "--dry", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return json.loads((out / "device-check.json").read_text())

    h200 = dry("--target", "h200", "--only", "vit_fp8", "bloomz_7b1")
    assert h200["target"] == "h200" and h200["order"] == ["vit_fp8", "bloomz_7b1"]
    assert set(h200["plans"]) == {"vit_fp8", "bloomz_7b1"} and all(p["ok"] for p in h200["plans"].values())
    h100 = dry("--only", "bloomz_7b1")
    assert h100["target"] == "h100"
    latency = {r["target"]: table.predicted_s(r["estimate_before"]["bloomz_7b1"]) for r in (h100, h200)}
    assert 0 < latency["h200"] < latency["h100"]


def test_the_wheel_list_is_well_formed_and_under_the_limit():
    listed, problems = wheels.read(LIST)
    assert problems == [] and wheels.check_list(listed) == []
    assert {w.key for w in listed} >= {"lark", "deepspeed", "torchao", "pydantic", "pydantic-core"}


def test_a_bad_wheel_list_is_refused(tmp_path):
    bad = tmp_path / "list.txt"
    bad.write_text("lark==1.3.1 abc 10 (short hash)\n" + f"x==1 {'0' * 64} {70 * 2**20} (big)\n"
                   + f"x==2 {'0' * 64} 1 (again)\n")
    listed, problems = wheels.read(bad)
    problems += wheels.check_list(listed)
    assert len(problems) == 3 and "two versions" in problems[1] and "64 MiB" in problems[2]


@pytest.mark.parametrize("package", ["deepspeed", "pydantic", "lark", "rich"])
def test_what_a_carried_package_requires_is_carried_or_in_the_image(package):
    """Requires-Dist of the installed copy (same version as listed): each one in the list or the image."""
    listed, _ = wheels.read(LIST)
    carried = {w.key: w.version for w in listed}
    assert importlib.metadata.version(package) == carried[wheels.canonical(package)]
    for req in importlib.metadata.requires(package) or []:
        if "extra ==" in req:
            continue
        name = wheels.canonical(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
        assert name in carried or name in IMAGE, f"{package} requires {req}: neither carried nor in the image"


def test_the_listed_versions_are_the_pinned_ones_except_torchao():
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "scripts" / "constraints.txt").read_text(), re.M))
    pins = {wheels.canonical(k): v for k, v in pins.items()}
    listed, _ = wheels.read(LIST)
    differ = {w.key for w in listed if w.key in pins and pins[w.key] != w.version}
    # torchao: 0.17.0 on the device (the release beside torch 2.11), the pinned 0.18.0 here
    assert differ == {"torchao"}


def test_the_table_sets_each_figure_beside_the_seed_and_the_estimate():
    def run(median, status="ok", **results):
        return {"run_id": "r", "summary": {"status": status, "stats": {"step_time": {"median": median}},
                                           "results": results}}
    record = {"kind": "device", "parts": {"vit_bf16": run(0.25), "vit_compiled": run(0.2, compile_s=50.0),
                                          "vit_fp8": run(0.16, compile_s=60.0)},
              "estimate_before": {"vit_bf16": {"step_time_s": 0.2}}, "estimate_after": {}, "skipped": {}}
    rows = {r["part"]: r for r in table.figures(record)}
    assert rows["vit_bf16"]["vs_seed"] == pytest.approx(0.25 / 0.199)
    assert rows["vit_bf16"]["estimate_before_error"] == pytest.approx(-0.2)
    assert rows["vit_compiled"]["speedup_over"] == {"part": "vit_bf16", "x": pytest.approx(1.25)}
    assert rows["vit_fp8"]["speedup_over"]["x"] == pytest.approx(1.25) and rows["vit_fp8"]["seed"]["value"] == 1.2
    assert rows["bloomz_7b1"]["status"] == "not run"
    md = table.markdown(record)
    assert "MEASURED" in md and "×1.25 over vit_bf16" in md and "compile 50.0 s apart" in md


@pytest.mark.slow
def test_cpu_smoke_runs_parts_through_accelctl_run_and_tables_them(tmp_path):
    """Two parts rehearsed on this CPU through the harness's own run path (~1 min here)."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.device", str(out), "--cpu-smoke", "--budget-s", "900",
                           "--only", "vit_bf16", "bloomz_7b1"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((out / "device-check.json").read_text())
    rows = {r["part"]: r for r in table.figures(record)}
    assert rows["vit_bf16"]["status"] == rows["bloomz_7b1"]["status"] == "ok"
    assert rows["vit_bf16"]["measured_s"] > 0 and rows["bloomz_7b1"]["measured_s"] > 0
    assert rows["bloomz_7b1"]["estimate_before_s"] > 0 and "CPU SMOKE" in (out / "device-check.md").read_text()
    # rehearsals do not calibrate the estimate: each refused by name, none passed off as a fit
    assert record["calibration"]["status"] == "not run" and len(record["calibration"]["dropped"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["device-check.json", "device-check.log", "device-check.md"]


@pytest.mark.slow
def test_the_wheel_script_downloads_and_builds_the_set_under_64_mib():
    """scripts/device-wheels.sh for real: PyPI downloads checked by hash, deepspeed built (~40 s)."""
    proc = subprocess.run(["bash", "scripts/device-wheels.sh"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    files = list((ROOT / ".whl").glob("*.whl"))
    listed, _ = wheels.read(LIST)
    assert len(files) == len(listed) and sum(f.stat().st_size for f in files) < wheels.LIMIT_BYTES


def test_a_part_past_its_timeout_is_stopped_with_everything_it_started(tmp_path, monkeypatch):
    from bench.device import steps

    monkeypatch.setattr(steps, "GRACE_S", 0.5)
    marker = tmp_path / "grandchild-alive"
    # ignores SIGINT (the polite stop), and leaves a grandchild that would outlive a plain kill
    script = f"trap '' INT; (sleep 30; touch {marker}) & sleep 30"
    with open(tmp_path / "log", "w") as log:
        outcome = steps.run_command(["bash", "-c", script], 1.0, log)
    assert outcome.timed_out and outcome.seconds < 10
    pids = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout.split()
    assert pids == [], "a process of the stopped part outlived it"
    assert "TIMED OUT" in (tmp_path / "log").read_text()


def test_the_kernel_check_shapes_suit_fp8_gemms_and_it_says_so_without_cuda(tmp_path):
    """``torch._scaled_mm`` takes dims that divide by 16; on a machine without CUDA the kernel
    check writes that it found none and exits 2 (never a figure)."""
    from bench.device import kernels

    assert all(d % 16 == 0 for m, k, n, _ in kernels.SHAPES for d in (m, k, n))
    out = tmp_path / "kernels.json"
    proc = subprocess.run([sys.executable, "-m", "bench.device.kernels", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    record = json.loads(out.read_text())
    if record["cuda"]:
        pytest.skip("a CUDA device is here: the check measures instead")
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr and set(record) == {"cuda", "torch"}

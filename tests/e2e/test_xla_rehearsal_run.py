"""`accelctl run vit_neuron.wl -t inf2_xlarge --rehearse`: seed 004's Inferentia2 target
rehearsed by a user's command through torch-xla's own code path on the XLA CPU device.

With a complete ``.venv-xla`` (``scripts/setup-xla.sh``; ``scripts/setup.sh --test`` runs it)
the plan's one launch is that venv's interpreter running the worker on ``PJRT_DEVICE=CPU``;
without it the same command is the plain CPU rehearsal with a warning naming the script.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import api
from accelctl.backends.xla_neuron.cpu_rehearsal import unavailable, xla_python, xla_venv
from accelctl.report.entry import entry_from_run
from accelctl.run.store import load_run

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD, TARGET = ROOT / "workloads" / "vit_neuron.wl", "inf2_xlarge"
needs_xla = pytest.mark.skipif(xla_python() is None, reason=f"no complete {xla_venv()}: scripts/setup-xla.sh "
                               "makes it (scripts/setup.sh --test runs it; CI does)")


@pytest.mark.slow
@needs_xla
def test_run_rehearse_of_an_inf2_target_trains_on_the_xla_cpu_device(tmp_path):
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(WORKLOAD), "-t", TARGET, "--rehearse",
                         "--headless", "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert f"REHEARSAL of target {TARGET} (2 x inf2) on the XLA CPU device (torch-xla 2.9.0)" in cp.stdout
    assert "compiled" in cp.stdout and "graph(s) in" in cp.stdout  # the console's compile line
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    plan = json.loads((run_dir / "plan.json").read_text())
    (launch,) = plan["launches"]
    assert launch["argv"][0] == str(xla_python()) and launch["argv"][1:3] == ["-m", "accelctl.worker"]
    assert launch["env"]["PJRT_DEVICE"] == "CPU"
    assert launch["env"]["XLA_USE_BF16"] == "1"  # the target's xla_use_bf16 = on (seed 004), rehearsed
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["target"] == TARGET
    ran = summary["what_ran"]["rehearsal"]
    assert ran["of"] == TARGET and ran["on"] == "the XLA CPU device (torch-xla 2.9.0)"
    results = summary["results"]
    assert results["compiles"] >= 2 and results["compile_s"] > 0
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["kind"] == "run_started")
    assert started["details"]["adapter"] == "xla" and started["env"]["device"].startswith("xla:")
    losses = [e["loss"] for e in events if e["kind"] == "step" and e.get("rank", 0) == 0]
    # sized for this CPU (accelctl.plan.rehearsal_size): 2 warm-up + 5 measured steps, too few
    # for a learning curve to show through the noise of random batches; each step's loss is real
    assert len(losses) == 7 and all(math.isfinite(x) and 0 < x < 20 for x in losses), losses
    # XLA_USE_BF16=1: torch-xla held and computed the fp32 tensors in bf16, so every loss is a bf16 value
    assert all(bf16_exact(x) for x in losses), losses
    assert "measured steps" in " ".join(plan.get("rehearsal", {}).get("changes", [])), plan.get("rehearsal")
    entry = entry_from_run(load_run(run_dir.name, str(tmp_path)))  # reports say where it ran, too
    assert entry.ran.startswith(f"REHEARSAL of {TARGET} on the XLA CPU device (torch-xla 2.9.0), stand-in")


def bf16_exact(x: float) -> bool:
    """Whether ``x`` is a bfloat16 value (its float32 bits end in 16 zeros)."""
    return struct.unpack("<I", struct.pack("<f", x))[0] & 0xFFFF == 0


@pytest.mark.slow
@needs_xla
def test_without_xla_use_bf16_the_losses_are_float32(tmp_path):
    """The contrast of the run above: the same rehearsal with ``xla_use_bf16 = off`` (the stand-in
    rehearses in fp32) gives losses bf16 cannot hold."""
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(WORKLOAD), "-t", TARGET, "--rehearse",
                         "--headless", "--runs-dir", str(tmp_path), "--set", f"target.{TARGET}.xla_use_bf16=off"],
                        capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert "XLA_USE_BF16" not in json.loads((run_dir / "plan.json").read_text())["launches"][0]["env"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    losses = [e["loss"] for e in events if e["kind"] == "step" and e.get("rank", 0) == 0]
    assert len(losses) == 7 and not all(bf16_exact(x) for x in losses), losses


def test_plan_rehearse_says_where_it_rehearses_and_imports_no_torch():
    """``plan --rehearse``: the XLA CPU rehearsal with the venv, else the plain one that says
    it is not, and how to get it; either way without importing torch."""
    cp = subprocess.run([sys.executable, "-c", (
        "import sys; from accelctl.cli import main; code = main(['plan', sys.argv[1], '-t', sys.argv[2], '--rehearse']);"
        " assert 'torch' not in sys.modules, 'plan imported torch'; sys.exit(code)"), str(WORKLOAD), TARGET],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    if xla_python() is not None:
        assert "REHEARSAL on the XLA CPU device (torch-xla 2.9.0)" in cp.stdout
        assert f"{xla_python()} -m accelctl.worker" in cp.stdout
    else:
        assert "XLA CPU rehearsal" in cp.stdout and "scripts/setup-xla.sh" in cp.stdout


def test_without_the_venv_the_plain_rehearsal_warns_how_to_get_the_xla_one():
    (spec,) = api.load(WORKLOAD)
    plain = api.plan(spec, TARGET, rehearse=True)
    warned = unavailable(plain)
    assert warned.launches == plain.launches and warned.rehearsal.on == "this CPU"
    assert "not available" in warned.warnings[-1] and "scripts/setup-xla.sh" in warned.warnings[-1]
    # a non-Neuron target has no device path of its own: its rehearsal is the plain one
    (fp8,) = api.load(ROOT / "workloads" / "vit_fp8.wl")
    assert api.plan(fp8, "p5_fp8", rehearse=True, device_path=True) == api.plan(fp8, "p5_fp8", rehearse=True)

"""The numbers a plan is judged by reach scripts as numbers: ``plan --json`` and ``estimate
--json`` carry the parameter count and the memory per device by term, the same in both; the
text plan and the plan summary print the parameter count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from accelctl.api import load, plan
from accelctl.contract.plan import Plan
from accelctl.plan.memory import fmt_params

ROOT = Path(__file__).resolve().parents[2]
BLOOMZ = ROOT / "workloads" / "bloomz.wl"
TERMS = ("weights", "gradients", "optimizer", "activations", "kv_cache", "reserve", "data")


def cli(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_plan_and_estimate_json_carry_the_same_parameter_count_and_memory_terms():
    planned = cli("plan", str(BLOOMZ), "-w", "bloomz_176b", "-t", "a100", "--json")["result"]["plans"][0]
    facts = planned["plan"]["facts"]
    estimated = cli("estimate", str(BLOOMZ), "-w", "bloomz_176b", "-t", "a100", "--json")["result"]["estimates"][0]
    assert facts["params"] == estimated["params"] == planned["plan"]["job"]["model"]["params"] == 176.2e9
    memory = facts["memory_per_device"]
    assert memory == estimated["memory_per_device"]
    assert abs(sum(memory[k] for k in TERMS) - memory["total"]) < 1.0
    assert memory["weights"] == 176.2e9 * 2 / 8  # fp16, deepspeed_inference tp = 8
    assert memory["capacity"] == 80e9 and facts["fits"] is True and estimated["fits"] is True
    assert facts["basis"] == "real" and isinstance(estimated["flops_per_step"], float)


def test_the_facts_survive_the_plan_file_and_the_text_plan_prints_the_count():
    spec = next(s for s in load(BLOOMZ) if s.name == "bloomz_7b")
    p = plan(spec, "a100_1x_plain")
    assert p.facts is not None and p.facts.params == spec.model.params
    assert Plan.from_dict(json.loads(p.to_json())) == p
    text = cli_text("plan", str(BLOOMZ), "-w", "bloomz_7b", "-t", "a100_1x_plain")
    assert f"#   model: {fmt_params(p.facts.params)} parameters (real model)" in text.splitlines()[:3]
    summary = cli_text("plan", str(BLOOMZ), "-w", "bloomz_7b")
    head = next(line for line in summary.splitlines() if line.startswith("target"))
    assert head.split()[:6] == ["target", "backend", "engine", "devices", "params", "memory"]
    assert fmt_params(p.facts.params) in next(line for line in summary.splitlines()
                                              if line.startswith("a100_1x_plain "))


def test_a_plan_file_written_before_the_facts_reads_without_them():
    spec = next(s for s in load(BLOOMZ) if s.name == "bloomz_7b")
    data = json.loads(plan(spec, "a100_1x_plain").to_json())
    data.pop("facts")
    assert Plan.from_dict(data).facts is None


def test_parameter_counts_read_as_model_cards_write_them():
    assert [fmt_params(n) for n in (7_069_016_064, 125_081_088, 54_342)] == ["7.07 B", "125.08 M", "54,342"]


def cli_text(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout

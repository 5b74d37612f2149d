"""The CPU stand-in of a Hub model keeps its family's structure, and runs for real.

One file names seven Hub models by id, each with its real config.json (tests/data/hf_configs,
workloads/configs); ``accelctl run`` runs their cpu targets in one shared worker process
(training for some, generation for the others).  Each run must build the family's own
transformers class at the stand-in's shape: the parameters the worker counted equal
``accelctl.models.param_count`` of the stand-in the check pass derived from the real shape
(grouped-query ratio, tied head, experts), which differs between those structures.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import load
from accelctl.models import param_count

ROOT = Path(__file__).resolve().parents[2]
#: family -> its config.json (the Hub id is the file's name under its owner) and task
DATA, WL = "tests/data/hf_configs", "workloads/configs"
MODELS = {f: (f"{d}/{name}.json", task) for f, d, name, task in [
    ("llama", DATA, "Meta-Llama-3-8B", "pretrain"), ("mistral", WL, "Mistral-7B-v0.1", "generate"),
    ("qwen2", DATA, "Qwen2-7B", "pretrain"), ("gemma", DATA, "gemma-7b", "generate"),
    ("mixtral", WL, "Mixtral-8x7B-v0.1", "pretrain"), ("gpt_neox", DATA, "gpt-neox-20b", "generate"),
    ("falcon", DATA, "falcon-7b", "pretrain")]}

pytestmark = pytest.mark.slow


def _workloads() -> str:
    out = []
    for family, (config, task) in MODELS.items():
        ref = f"owner/{Path(config).stem}"
        kind = "task pretrain { }" if task == "pretrain" else "task generate { max_new_tokens = 4 }"
        out.append(f'workload tiny_{family} {{\n  {kind}\n  model hf("{ref}") {{ config = "{ROOT / config}" }}\n'
                   f"  dataset synthetic(seq_len = 32 tokens)\n  batch {{ micro = 2 }}\n"
                   f"  measure {{ warmup = 1 steps  steps = 3 steps }}\n  target cpu {{ devices = 1 }}\n}}\n")
    return "\n".join(out)


def test_every_new_family_stand_in_runs_with_its_structure(tmp_path):
    wl = tmp_path / "families.wl"
    wl.write_text(_workloads(), encoding="utf-8")
    specs = {s.name: s for s in load(wl)}
    # the structure the stand-ins keep: Llama-3's 32 heads over 8 KV heads -> 4 over 1, gemma's
    # tied head, Mixtral's experts (4 of at most 4, 2 per token), falcon's single K/V head
    assert specs["tiny_llama"].model.stand_in["kv_heads"] == 1
    assert specs["tiny_gemma"].model.stand_in["tied"] is True
    assert specs["tiny_mixtral"].model.stand_in["experts"] == 4
    assert specs["tiny_falcon"].model.stand_in["kv_heads"] == 1
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "--target", "cpu", "--headless",
                         "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    summaries = {}
    for run_dir in (tmp_path / "runs").iterdir():
        if run_dir.is_dir():
            s = json.loads((run_dir / "summary.json").read_text())
            summaries[s["workload"]] = s
    assert set(summaries) == set(specs)
    for name, spec in specs.items():
        s = summaries[name]
        model = s["what_ran"]["model"]
        assert s["status"] == "ok", name
        assert (model["family"], model["scale"]) == (spec.model.family, "stand_in"), name
        assert model["params"] == param_count.total(spec.model.family, spec.model.stand_in), name
        if spec.task.training:
            steps = [json.loads(line) for line in (tmp_path / "runs" / s["run_id"] / "events.jsonl").read_text()
                     .splitlines() if line and json.loads(line)["kind"] == "step"]
            assert len(steps) == 4 and all(math.isfinite(e["loss"]) for e in steps), name
        else:
            assert s["stats"]["generation"]["per_token_median_s"] > 0

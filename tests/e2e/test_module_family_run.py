"""A model accelctl has no formulas for runs for real on the CPU as transformers' own class at a
small size: a gemma2 stand-in is a small Gemma2ForCausalLM (sliding and global layers, a tied
head), a deepseek_v2 one a small DeepseekV2ForCausalLM (MLA, a mixture after a dense layer).
``accelctl run`` of both cpu targets (one file, one shared worker) trains a few steps: the class
the worker built is the model's, its parameters those the module's facts gave the stand-in, the
losses finite and gemma2's falling."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import load

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests/data/hf_configs"
#: workload -> (config file, the class transformers builds for it)
MODELS = {"tiny_gemma2": ("gemma-2-9b", "Gemma2ForCausalLM"),
          "tiny_deepseek_v2": ("DeepSeek-V2-Lite", "DeepseekV2ForCausalLM")}

pytestmark = pytest.mark.slow


def test_the_cpu_stand_in_is_the_models_own_class_small_and_trains(tmp_path):
    pytest.importorskip("transformers")
    wl = tmp_path / "module.wl"
    wl.write_text("\n".join(
        f'workload {name} {{\n  task finetune {{ }}\n  model hf("owner/{config}") {{ config = "{CONFIGS / config}.json" }}\n'
        "  dataset synthetic(seq_len = 32 tokens)\n  batch { micro = 2 }\n  optimizer adamw(lr = 0.003)\n"
        "  measure { warmup = 1 steps  steps = 3 steps }\n  target cpu { devices = 1  precision = fp32 }\n}\n"
        for name, (config, _) in MODELS.items()), encoding="utf-8")
    specs = {s.name: s for s in load(wl)}
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "--target", "cpu", "--headless",
                         "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    summaries = {}
    for run_dir in (tmp_path / "runs").iterdir():
        if run_dir.is_dir():
            s = json.loads((run_dir / "summary.json").read_text())
            summaries[s["workload"]] = (s, run_dir)
    assert set(summaries) == set(MODELS)
    for name, (_, class_name) in MODELS.items():
        s, run_dir = summaries[name]
        model = s["what_ran"]["model"]
        assert s["status"] == "ok", name
        assert (model["family"], model["scale"]) == ("transformers", "stand_in"), name
        assert model["architecture"]["class_name"] == class_name, name
        assert model["params"] == specs[name].model.stand_in["params"], name
        losses = [json.loads(line)["loss"] for line in (run_dir / "events.jsonl").read_text().splitlines()
                  if line and json.loads(line)["kind"] == "step"]
        assert len(losses) == 4 and all(math.isfinite(x) for x in losses), (name, losses)
    gemma = [json.loads(line)["loss"] for line in (summaries["tiny_gemma2"][1] / "events.jsonl").read_text()
             .splitlines() if line and json.loads(line)["kind"] == "step"]
    assert gemma[-1] < gemma[0], gemma


def test_fsdp_wraps_each_decoder_layer_and_the_target_rehearses(tmp_path):
    """``parallel = fsdp``: the blocks sharded one by one are the model's ``_no_split_modules``
    (Gemma2DecoderLayer), and the h100 x 8 target's rehearsal (FSDP2 over this CPU's processes)
    trains."""
    transformers = pytest.importorskip("transformers")
    from accelctl.models import module_family
    from accelctl.worker import fsdp

    small = module_family.stand_in_config(json.loads((CONFIGS / "gemma-2-9b.json").read_text()))
    config = transformers.AutoConfig.for_model("gemma2", **{k: v for k, v in small.items() if k != "model_type"})
    model = transformers.AutoModelForCausalLM.from_config(config)
    blocks = fsdp.blocks(model, "transformers")
    assert [type(b).__name__ for b in blocks] == ["Gemma2DecoderLayer"] * 2
    wl = tmp_path / "fsdp.wl"
    wl.write_text(f'workload g {{\n  task finetune {{ }}\n  model hf("google/gemma-2-9b") {{ config = '
                  f'"{CONFIGS}/gemma-2-9b.json" }}\n  dataset synthetic(seq_len = 32 tokens)\n  precision bf16\n'
                  "  measure { warmup = 1 steps  steps = 2 steps }\n"
                  "  target h100x8 { device = h100  devices = 8  parallel = fsdp }\n}\n", encoding="utf-8")
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-t", "h100x8", "--rehearse",
                         "--headless", "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True,
                        timeout=600, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "ok" and s["what_ran"]["model"]["architecture"]["class_name"] == "Gemma2ForCausalLM"

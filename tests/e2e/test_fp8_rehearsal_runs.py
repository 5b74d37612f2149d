"""`accelctl run FILE -t T --rehearse --fp8`, for real: seed 002's ViT stand-in (vit_fp8.wl,
target p5_fp8, scaled to seconds) and a small GPT-2, each trained FP8-emulated beside its
baseline in one real worker process; the console, events and summary.json checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

GPT2_FP8 = """
workload tiny_gpt2_fp8 {
  seed = 0
  task pretrain { objective = causal_lm }
  model gpt2(layers = 2, hidden = 64, heads = 4, vocab = 1000, max_positions = 128)
  dataset synthetic(seq_len = 32 tokens)
  optimizer adamw(lr = 0.001, weight_decay = 0.01, grad_clip = 1.0)
  precision bf16
  batch { micro = 8 }
  measure { warmup = 2 steps  steps = 10 steps }
  target h100_fp8 {
    instance = p5.48xlarge
    precision fp8 { format = hybrid  amax_history = 16  amax_algo = max  margin = 0 }
  }
}
"""


def _vit_fp8_small() -> str:
    """vit_fp8.wl as written (model, stand-in, recipe), with a CI-sized batch and step count."""
    from accelctl.language import settings

    path = ROOT / "workloads" / "vit_fp8.wl"
    text = path.read_text(encoding="utf-8")
    # as `--set` writes them into the file (every target; a written global batch dropped)
    small = settings.applied(str(path), text, settings.parse_sets(
        ["batch.micro=16", "measure.warmup=2 steps", "measure.steps=8 steps"]))
    assert "micro = 16" in small and "warmup = 2 steps" in small and "steps = 8 steps" in small
    return small


def _rehearse(tmp_path: Path, name: str, text: str, *target: str) -> tuple[str, dict, list[dict]]:
    wl = tmp_path / name
    wl.write_text(text, encoding="utf-8")
    runs = tmp_path / "runs"
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), *target, "--rehearse", "--fp8",
                         "--headless", "--runs-dir", str(runs)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    events = [json.loads(line) for line in (run_dir / "rank0.jsonl").read_text().splitlines()]
    return cp.stdout, json.loads((run_dir / "summary.json").read_text()), events


def _check_report(stdout: str, summary: dict, events: list[dict], steps: int, layers: int) -> dict:
    assert "FP8 REHEARSAL (CPU emulation, not an FP8 GPU)" in stdout and "REHEARSAL of target" in stdout
    report = summary["results"]["fp8_rehearsal"]
    assert summary["status"] == "ok" and report["emulation"] == "cpu" and report["recipe"]["scaling"] == "delayed"
    assert len(report["steps"]) == steps and len(report["layers"]) == layers
    assert all(r["loss_fp8"] is not None and r["loss_baseline"] is not None for r in report["steps"])
    # the arms differ (FP8 is not the baseline) but stay close on these well-scaled models
    assert any(r["loss_fp8"] != r["loss_baseline"] for r in report["steps"])
    assert report["verdict"] == "tracks" and report["keep_higher_precision"] == {}
    assert report["steps"][-1]["loss_fp8"] < report["steps"][0]["loss_fp8"]  # FP8 training learns
    step_events = [e for e in events if e["kind"] == "step"]
    assert [e["loss"] for e in step_events] == [r["loss_fp8"] for r in report["steps"]]
    logs = [e["message"] for e in events if e["kind"] == "log"]
    assert sum("FP8 rehearsal step" in m for m in logs) == steps
    assert any(m.startswith("FP8 rehearsal verdict: tracks") for m in logs)
    for stats in report["layers"].values():
        assert stats["input"]["elements"] > 0 and stats["grad_output"]["elements"] > 0
        assert 0 < stats["output_rel_error_mean"] < 0.15
    return report


def test_seed_002_vit_stand_in_fp8_rehearsal(tmp_path):
    stdout, summary, events = _rehearse(tmp_path, "vit_fp8.wl", _vit_fp8_small(), "-t", "p5_fp8")
    report = _check_report(stdout, summary, events, steps=10, layers=8)  # 2 blocks x (qkv, proj, fc1, fc2)
    assert report["recipe"] == {"format": "hybrid", "amax_history": 1024, "amax_algo": "max", "margin": 0,
                                "scaling": "delayed"}
    assert report["kept_by_design"] == ["head"] and summary["what_ran"]["rehearsal"]["of"] == "p5_fp8"


def test_small_gpt2_fp8_rehearsal_picks_the_fp8_target(tmp_path):
    stdout, summary, events = _rehearse(tmp_path, "gpt2_fp8.wl", GPT2_FP8)  # no -t: the first fp8 target
    assert "--rehearse --fp8: the first fp8 target" in stdout
    report = _check_report(stdout, summary, events, steps=12, layers=8)  # 2 blocks x 4 Conv1D
    assert report["recipe"]["amax_history"] == 16 and report["kept_by_design"] == ["lm_head"]
    assert set(report["layers"]) >= {"transformer.h.0.attn.c_attn", "transformer.h.1.mlp.c_proj"}

"""Real data end to end: ``accelctl run`` of a T5 stand-in fine-tune on files the test writes.

Workload file -> check -> plan -> the real worker, which reads the files through
``datasets.load_dataset`` (csv, jsonl), tokenizes them with the stand-in's tokenizer and
trains; the run's summary and console say what data was read and how many records, and
the loss falls.  A Hub dataset that is not in the (empty) HF cache fails the run unless
the workload names a fallback.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("datasets")

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

ANIMALS = ["cat", "dog", "fox", "owl", "bee", "elk"]
VERBS = ["sat", "ran", "hid", "sang", "slept", "swam"]
# 24 article / summary pairs: micro-batches of 4 are 6 distinct batches, replayed
PAIRS = [{"article": f"Story {i}. The {a} {v} near the river on day {i}; later the {a} {v} again.",
          "highlights": f"the {a} {v}"}
         for i, (a, v) in enumerate((a, v) for a in ANIMALS for v in VERBS[:4])]

WORKLOAD = """
workload t5_files {
  task finetune { objective = seq2seq }
  model t5(layers = 2, hidden = 64, heads = 4)
  dataset files("DATA") {
    COLUMNS
    seq_len    = 48 tokens
    target_len = 12 tokens
  }
  batch { micro = 4 }
  optimizer adamw { lr = 0.003 }
  measure { warmup = 1 steps  steps = 16 steps }
  target cpu { devices = 1  threads = 1 }
}
"""


def run(tmp: Path, data: str, columns: str, text: str = WORKLOAD) -> tuple[subprocess.CompletedProcess, Path | None]:
    """``accelctl run`` of the workload's cpu target, with an HF cache of its own (empty)."""
    wl = tmp / "t5_files.wl"
    wl.write_text(text.replace("DATA", data).replace("COLUMNS", columns), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "HF_HOME": str(tmp / "hf_home"), "HF_DATASETS_CACHE": str(tmp / "hf_home" / "datasets")}
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "--target", "cpu", "--headless",
                         "--runs-dir", str(tmp / "runs")], capture_output=True, text=True, timeout=600, cwd=ROOT,
                        env=env)
    runs = [p for p in (tmp / "runs").iterdir() if p.is_dir()] if (tmp / "runs").exists() else []
    return cp, runs[0] if runs else None


def measured_losses(run_dir: Path) -> list[float]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]
    return [e["loss"] for e in events if e["kind"] == "step" and e["phase"] == "measure"]


def test_t5_finetune_on_a_csv_of_article_summary_pairs(tmp_path):
    with (tmp_path / "pairs.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["article", "highlights"])
        w.writeheader()
        w.writerows(PAIRS)
    cp, run_dir = run(tmp_path, "pairs.csv", 'column = "article"  target_column = "highlights"')
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    d = summary["details"]
    assert d["data"] == f"files:{tmp_path / 'pairs.csv'} (csv)"
    assert (d["data_format"], d["data_column"], d["data_target_column"]) == ("csv", "article", "highlights")
    assert d["data_records"] == d["data_rank_records"] == len(PAIRS)
    # the console says what was read
    assert f"data: files:{tmp_path / 'pairs.csv'} (format csv, split train) · 24 records, 24 on rank 0 · " \
           "column article -> highlights" in cp.stdout
    losses = measured_losses(run_dir)
    assert len(losses) == 16 and losses[-1] < losses[0], losses
    assert summary["stats"]["loss"]["decreased"], summary["stats"]["loss"]


def test_t5_finetune_on_a_jsonl_text_file(tmp_path):
    # no target column: the target is the text's continuation (seq_len + target_len packed tokens)
    with (tmp_path / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for p in PAIRS:
            text = f"{p['article']} In short: {p['highlights']}."
            fh.write(json.dumps({"id": len(p["article"]), "text": text}) + "\n")
    cp, run_dir = run(tmp_path, "corpus.jsonl", "")
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    d = json.loads((run_dir / "summary.json").read_text())["details"]
    assert (d["data_format"], d["data_column"], d["data_records"]) == ("json", "text", len(PAIRS))
    assert "data_target_column" not in d and d["tokens_per_sample"] == 48 + 12
    losses = measured_losses(run_dir)
    assert len(losses) == 16 and losses[-1] < losses[0], losses


HUB = """
workload t5_hub {
  task finetune { objective = seq2seq }
  model t5(layers = 2, hidden = 64, heads = 4)
  dataset hf("cnn_dailymail") { config = "3.0.0"  FALLBACK seq_len = 32 tokens  target_len = 8 tokens }
  measure { warmup = 1 steps  steps = 2 steps }
  target cpu { devices = 1  threads = 1 }
}
"""


@pytest.mark.parametrize("fallback", ["", "fallback = synthetic"])
def test_hub_dataset_not_in_the_cache_fails_unless_a_fallback_is_named(tmp_path, fallback):
    cp, run_dir = run(tmp_path, "", "", HUB.replace("FALLBACK", fallback))
    summary = json.loads((run_dir / "summary.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]
    why = "Couldn't reach 'cnn_dailymail' on the Hub (OfflineModeIsEnabled)"
    if not fallback:
        assert cp.returncode != 0 and summary["status"] == "failed"
        (failed,) = [e for e in events if e["kind"] == "run_failed"]
        assert "Hub dataset 'cnn_dailymail' (config 3.0.0, split 'train') could not be loaded" in failed["message"]
        assert why in failed["message"] and "No fallback applies: the workload names none" in failed["message"]
        return
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    warnings = [e["message"] for e in events if e["kind"] == "log" and e["level"] == "warning"]
    assert any(why in w and "HF_DATASETS_OFFLINE=1" in w and "fallback instead: synthetic data" in w
               for w in warnings), warnings
    d = summary["details"]
    assert d["data"] == "synthetic (fallback)" and d["data_wanted"] == "hf:cnn_dailymail/3.0.0"
    assert why in d["data_fallback_reason"]
    assert "  data: synthetic (fallback) -- FALLBACK: hf:cnn_dailymail/3.0.0 could not be loaded" in cp.stdout

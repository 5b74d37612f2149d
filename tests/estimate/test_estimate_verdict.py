"""One verdict in ``estimate``: a target ``plan`` refuses gets no figure, only plan's code and
words -- in the table, under it, and in ``--json`` -- while the targets that plan keep theirs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = textwrap.dedent("""
    workload f {
      task pretrain { objective = causal_lm }
      model gpt2(layers = 2, hidden = 64, heads = 4)
      precision fp8 { library = torchao }
      target gaudi2 { device = gaudi2  devices = 8 }
      target h100 { device = h100  devices = 1 }
    }
""")


def accelctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_target_plan_refuses_is_estimated_as_refused_in_plans_words(tmp_path):
    path = tmp_path / "f.wl"
    path.write_text(WORKLOAD, encoding="utf-8")
    planned = json.loads(accelctl("plan", str(path), "--json").stdout)["result"]["plans"]
    refusal = next(p for p in planned if p["target"] == "gaudi2")
    assert refusal["refused"] and refusal["diagnostics"][0]["code"] == "E520"
    words = refusal["diagnostics"][0]["message"]
    estimated = json.loads(accelctl("estimate", str(path), "--json").stdout)["result"]["estimates"]
    by = {e["target"]: e for e in estimated}
    assert by["gaudi2"]["status"] == "refused"
    assert by["gaudi2"]["refusal"] == {"code": "E520", "message": words, "hint": refusal["diagnostics"][0]["hint"]}
    assert by["gaudi2"]["step_time_s"] is None and by["gaudi2"]["fits"] is None
    assert by["h100"]["status"] == "ok" and by["h100"]["step_time_s"] > 0
    text = accelctl("estimate", str(path)).stdout
    row = next(line for line in text.splitlines() if line.strip().startswith("gaudi2 "))
    assert "refused E520" in row and " ms" not in row
    assert f"gaudi2: refused E520: {words}" in text

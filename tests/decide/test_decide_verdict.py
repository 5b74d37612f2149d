"""One verdict in ``sweep --estimate``: every point that shows a figure is one ``accelctl plan``
accepts, planned here as ``plan`` plans it (its ``--set`` arguments on the workload file the
test wrote); a point ``plan`` refuses shows plan's code and words and no figure."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from accelctl.cli import main


def run(capsys, *args: str) -> tuple[int, dict]:
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def planned(capsys, path: Path, target: str, sets) -> dict:
    """``accelctl plan PATH -t TARGET --set ... --json``: the target's plan record."""
    code, doc = run(capsys, "plan", str(path), "-t", target, *[a for s in sets for a in ("--set", s)])
    plans = doc["result"]["plans"]
    assert plans, doc.get("diagnostics")
    return {"code": code, **plans[0]}


FP8 = textwrap.dedent("""
    workload f {
      task pretrain { objective = causal_lm }
      model gpt2(layers = 2, hidden = 64, heads = 4)
      dataset synthetic(seq_len = 1024 tokens)
      precision fp8 { library = torchao }
      target gaudi2 { device = gaudi2  devices = 8 }
      target h100 { device = h100  devices = 1 }
    }
""")


def test_sweep_estimate_plans_each_point_and_a_refused_one_has_plans_words(tmp_path, capsys):
    """A point plan refuses -- no backend for the target (E520), or its micro-batch does not fit
    (E530) -- is a row with plan's code and words and no figure, as ``estimate`` shows it; every
    row with a figure plans (the point's settings given to ``plan`` as ``--set``)."""
    path = tmp_path / "f.wl"
    path.write_text(FP8, encoding="utf-8")
    code, doc = run(capsys, "sweep", str(path), "--over", "target=gaudi2,h100", "--over",
                    "batch.micro=4,1000000", "--estimate")
    assert code == 0
    rows = doc["result"]["points"]
    assert len(rows) == 4
    for r in rows:
        got = planned(capsys, path, r["target"], [f"batch.micro={r['over.batch.micro']}"])
        if "refused" in r:
            d = got["diagnostics"][0]
            assert got["refused"] and r["refused"] == f"{d['code']}: {d['message']}"
            assert "step_time_s" not in r and "job_usd" not in r
        else:
            assert got["code"] == 0 and r["step_time_s"] > 0, r
    codes = {(r["target"], r["over.batch.micro"]): r.get("refused", "")[:4] for r in rows}
    assert codes == {("gaudi2", "4"): "E520", ("gaudi2", "1000000"): "E520", ("h100", "4"): "",
                     ("h100", "1000000"): "E530"}
    main(["sweep", str(path), "--over", "target=gaudi2,h100", "--over", "batch.micro=4,1000000", "--estimate",
          "--csv"])
    out = capsys.readouterr().out
    refused = [ln for ln in out.splitlines() if "refused E5" in ln]
    assert len(refused) == 3 and not any("DOES NOT FIT" in ln or " ms" in ln for ln in refused)

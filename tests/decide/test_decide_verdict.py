"""One verdict in the decision verbs: every row of ``pick``, ``fit`` and ``sweep --estimate`` that
shows a figure is one ``accelctl plan`` accepts, planned here as ``plan`` plans it (its
``--set`` arguments on the workload file the test wrote); a row ``plan`` refuses shows plan's
code and words and no figure.  ``pick`` considers every target that plans, gives each candidate
the micro-batch ``fit``'s model finds for its memory, and answers the same whatever the order of
the targets in the file and whatever micro-batch one of them writes."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from accelctl.cli import main

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "data" / "hf_configs" / "Meta-Llama-3-8B.json"
HEAD = """\
workload llama3_8b_ft {
  task finetune { objective = causal_lm }
  model hf("meta-llama/Meta-Llama-3-8B") {
    family = llama
    config = "Meta-Llama-3-8B.json"
  }
  dataset synthetic(seq_len = 2048 tokens)
  optimizer adamw(lr = 0.00002)
  precision bf16
  gradient_checkpointing = on
  batch { micro = 4 }
"""
TARGETS = {
    "h100": "  target h100 { instance = p5.48xlarge  nodes = 2  parallel = zero(stage = 3) }\n",
    "gaudi2": "  target gaudi2 {\n    device = gaudi2\n    instance = gaudi2-hls\n    devices = 8\n"
              "    parallel = zero(stage = 3)\n    batch { micro = 1 }\n  }\n",
    "trn1": "  target trn1 {\n    instance = trn1.32xlarge\n    parallel = zero(stage = 1, tp = 8)\n"
            "    batch { micro = MICRO }\n  }\n",
    "cpu": "  target cpu { devices = 1  precision = fp32 }\n",
}


def llama3(tmp_path: Path, name: str, order=("h100", "gaudi2", "trn1", "cpu"), trn1_micro: int = 1) -> Path:
    """A Llama-3-8B fine-tune (its real config beside it) with the targets in ``order``."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(CONFIG, folder / CONFIG.name)
    body = "".join(TARGETS[t].replace("MICRO", str(trn1_micro)) for t in order)
    path = folder / "llama3.wl"
    path.write_text(HEAD + body + "}\n", encoding="utf-8")
    return path


def run(capsys, *args: str) -> tuple[int, dict]:
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def planned(capsys, path: Path, target: str, sets) -> dict:
    """``accelctl plan PATH -t TARGET --set ... --json``: the target's plan record."""
    code, doc = run(capsys, "plan", str(path), "-t", target, *[a for s in sets for a in ("--set", s)])
    plans = doc["result"]["plans"]
    assert plans, doc.get("diagnostics")
    return {"code": code, **plans[0]}


def answer(doc) -> list[tuple]:
    return [(p["rank"], p["instance"], p["devices"], p["layout"], p["precision"], p["batch"], p["job_usd"])
            for p in doc["result"]["picks"]]


def test_pick_considers_every_target_that_plans_whatever_the_order_and_micro_batch(tmp_path, capsys):
    """The trn1 target as written (zero(stage = 1, tp = 8), a layout not in pick's own list)
    plans, so it is a candidate; the answer does not move when the file lists the targets in
    another order and trn1 writes another micro-batch: each candidate's micro-batch is its own."""
    a = llama3(tmp_path, "a")
    b = llama3(tmp_path, "b", order=("cpu", "trn1", "gaudi2", "h100"), trn1_micro=2)
    assert planned(capsys, a, "trn1", [])["code"] == 0
    work = ["--work", "1e8 tokens", "--deadline", "24 h", "--top", "300"]
    code_a, doc_a = run(capsys, "pick", str(a), *work)
    code_b, doc_b = run(capsys, "pick", str(b), *work)
    assert code_a == code_b == 0
    rows = doc_a["result"]["picks"]
    own = [p for p in rows if p["instance"] == "trn1.32xlarge" and p["devices"] == "1 x 32 trn1"
           and p["from_target"] == "trn1"]
    assert own and own[0]["layout"] == "zero-1 tp8", [(p["instance"], p["layout"]) for p in rows][:40]
    assert answer(doc_a) == answer(doc_b)
    assert [p["from_target"] for p in doc_a["result"]["picks"]] == [p["from_target"] for p in doc_b["result"]["picks"]]
    # its own fit: the largest micro-batch whose memory fits, not the micro-batch trn1 writes
    from accelctl.api import load_selected
    from accelctl.decide.fit import at_micro

    (spec,) = load_selected(str(a))
    t = spec.target("trn1")
    m = own[0]["micro"]
    assert m > 1 and at_micro(spec, t, m)[1].fits and not at_micro(spec, t, m + 1)[1].fits


def test_every_row_pick_shows_is_one_plan_accepts(tmp_path, capsys):
    """Ranked rows and rows without a price alike: each planned by ``accelctl plan -t T --set``
    with the row's settings, accepted, on the machine and at the micro-batch the row shows."""
    path = llama3(tmp_path, "a")
    code, doc = run(capsys, "pick", str(path), "--work", "1e8 tokens", "--top", "6")
    assert code == 0
    rows = doc["result"]["picks"] + doc["result"]["unpriced"]
    assert doc["result"]["picks"] and doc["result"]["unpriced"]  # an instance without a price is shown too
    for p in rows:
        got = planned(capsys, path, p["from_target"], p["settings"])
        assert got["code"] == 0 and not got.get("refused"), (p["settings"], got.get("diagnostics"))
        assert p["devices"].endswith(" " + got["plan"]["device"]), (p, got["plan"]["device"])
        assert f"batch.micro={p['micro']}" in p["settings"][-1]


def test_fit_on_gaudi_says_why_checkpointing_changes_nothing_and_what_does(tmp_path, capsys):
    """HPU lazy mode: the first-iteration graph holds every layer's activations whether or not
    checkpointing is on (the model calibrated on seed 000's T5-3B, which ran checkpointed), so
    switching it gives the same micro-batch -- fit says so, and offers eager mode, which
    changes it (and which plan accepts)."""
    path = llama3(tmp_path, "a")
    code, doc = run(capsys, "fit", str(path), "-t", "gaudi2")
    assert code == 0
    by = {v["name"]: v for v in doc["result"]["variants"]}
    assert by["gradient checkpointing off"]["largest_micro"] == by["as written"]["largest_micro"]
    eager = by["lazy_mode off"]
    assert eager["largest_micro"] > by["as written"]["largest_micro"] and not eager["refused_by_plan"]
    main(["fit", str(path), "-t", "gaudi2"])
    text = capsys.readouterr().out
    assert "holds every layer's activations with or without checkpointing" in text
    assert f"lazy_mode off -> {eager['largest_micro']}" in text


@pytest.mark.parametrize("target", ["gaudi2", "h100", "trn1"])
def test_every_fit_row_with_a_figure_is_one_plan_accepts(tmp_path, capsys, target):
    """Each layout fit shows a micro-batch for plans there (its settings, with ``plan``); one plan
    refuses shows plan's code and words, no micro-batch and no memory figure."""
    path = llama3(tmp_path, "a")
    _, doc = run(capsys, "fit", str(path), "-t", target)
    main(["fit", str(path), "-t", target])
    text = capsys.readouterr().out
    for v in doc["result"]["variants"]:
        if v["largest_micro"]:
            got = planned(capsys, path, target, v["settings"])
            assert got["code"] == 0, (v["name"], got.get("diagnostics"))
        elif v["refused_by_plan"]:
            assert v["total_bytes"] is None and v["above_bytes"] is None
            got = planned(capsys, path, target, v["settings"])
            d = got["diagnostics"][0]
            assert got["refused"] and v["refused_by_plan"] == f"{d['code']}: {d['message']}"
            line = next(ln for ln in text.splitlines() if ln.strip().startswith(v["name"] + " "))
            assert "refused by plan" in line and "largest micro-batch" not in line and " GB" not in line


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

"""A target that does not fit (E530) is refused with the fixes that plan, and only those: each
fix's ``--set`` arguments, applied the way ``accelctl plan FILE --set ...`` applies them, give a
target that plans; in ``--json`` they are machine-readable.  A target no fix saves says so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import api
from accelctl.errors import PlanError

ROOT = Path(__file__).resolve().parents[2]

LLAMA = """\
workload l {
  task finetune { }
  model hf("meta-llama/Meta-Llama-3-8B") { config = "Meta-Llama-3-8B.json" }
  dataset synthetic(seq_len = 2048 tokens)
  precision bf16
  batch { micro = 4 }
  target trn { instance = trn1.32xlarge }
  target h1 { device = h100 }
  target h8 { device = h100  devices = 8 }
  target g8 { device = gaudi2  devices = 8 }
}
workload g {
  task generate { max_new_tokens = 8 tokens }
  model hf("meta-llama/Meta-Llama-3-8B") { config = "Meta-Llama-3-8B.json" }
  dataset synthetic(seq_len = 2048 tokens)
  precision fp32
  batch { micro = 2048 }
  target a4 { device = a100_40gb  devices = 4 }
}
"""


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fixes")
    shutil.copy(ROOT / "tests/data/hf_configs/Meta-Llama-3-8B.json", folder)
    path = folder / "l.wl"
    path.write_text(LLAMA, encoding="utf-8")
    return path


def _refusals(path: Path) -> list[tuple[str, str, object]]:
    """(workload, target, diagnostic) of every target of the file that plan refuses."""
    out = []
    for spec in api.load(path):
        for t in spec.targets:
            try:
                api.plan(spec, t)
            except PlanError as exc:
                out.append((spec.name, t.name, exc.diagnostics[0]))
    return out


def _plans_with(path: Path, workload: str, target: str, sets: tuple[str, ...]) -> None:
    (spec,) = api.load_selected(path, workload, sets)
    api.plan(spec, target)  # a refusal raises: the fix did not plan


def test_every_fix_a_refusal_offers_plans_when_applied(llama):
    checked = 0
    for path in (llama, *sorted((ROOT / "workloads").glob("*.wl"))):
        for workload, target, d in _refusals(path):
            if d.code != "E530":
                continue
            for label, sets in d.fixes:
                assert all(s.startswith(f"target.{target}.") for s in sets), (label, sets)
                assert label in d.hint and all(f"--set {s}" in d.hint for s in sets), d.hint
                _plans_with(path, workload, target, sets)
                checked += 1
    assert checked >= 6  # the file's trn, h8, g8 and a4 have fixes; nothing here is vacuous


def test_the_fixes_are_the_ones_a_user_reaches_for(llama):
    by_target = {t: d for _, t, d in _refusals(llama)}
    assert set(by_target) == {"trn", "h1", "h8", "g8", "a4"}
    trn = [sets for _, sets in by_target["trn"].fixes]
    # Trainium shards through tensor parallel (neuronx-distributed); zero(stage = 3) is not built there
    assert any("target.trn.parallel=zero(stage = 1, tp = 8)" in sets for sets in trn), trn
    assert not any("zero(stage = 3)" in s for sets in trn for s in sets)
    # eight H100s hold it once FSDP shards the states (its activations keep no attention scores)
    assert by_target["h8"].fixes[0][1] == ("target.h8.parallel=fsdp",)
    assert any("target.a4.parallel=deepspeed_inference(tp = 4)" in sets for _, sets in by_target["a4"].fixes)
    # one H100 cannot hold an 8B model's AdamW state whatever is switched: no fix, and the hint says so
    assert by_target["h1"].fixes == () and "more memory or more devices" in by_target["h1"].hint


def test_fixes_are_machine_readable_in_validate_and_estimate_json(llama):
    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "accelctl.cli", *args, "--json"], cwd=llama.parent,
                           capture_output=True, text=True, timeout=120)
        return json.loads(r.stdout)

    diags = {d["message"].split("target ")[1].split(":")[0]: d for d in cli("validate", "l.wl")["diagnostics"]
             if d["code"] == "E530"}
    h8 = diags["h8"]["fixes"]
    assert h8 and all(set(f) == {"label", "set"} and f["set"] for f in h8)
    rows = cli("estimate", "l.wl", "-w", "l")["result"]["estimates"]
    h8_row = next(r for r in rows if r["target"] == "h8")
    assert h8_row["refusal"]["code"] == "E530" and h8_row["refusal"]["fixes"] == h8


def test_fp8_plans_exactly_where_e501s_hint_says_it_runs(tmp_path):
    """E501's hint names the devices whose family row says FP8 is built; each of those plans an
    fp8 target, and every other device with FP8 hardware is refused at plan."""
    from accelctl.catalog import DEVICES
    from accelctl.families import FAMILIES
    from accelctl.language.targets import FP8_WHERE

    path = tmp_path / "f.wl"
    for name, dev in DEVICES.items():
        if not dev.fp8:
            continue
        path.write_text(f"workload f {{ task pretrain {{ }} model llama(layers = 2, hidden = 64, heads = 4)\n"
                        f"  target t {{ device = {name}  precision fp8 }} }}\n", encoding="utf-8")
        specs, diags = api.validate(path)
        refused = [d.code for d in diags if d.code.startswith("E")]
        built = FAMILIES[dev.adapter].fp8_built
        assert (not refused) == built and (name in FP8_WHERE) == built, (name, refused, FP8_WHERE)
    path.write_text("workload f { task pretrain { } model llama(layers = 2, hidden = 64, heads = 4)\n"
                    "  target t { device = a100  precision fp8 } }\n", encoding="utf-8")
    _, diags = api.validate(path)
    (e501,) = [d for d in diags if d.code == "E501"]
    assert "gaudi" not in e501.hint and "h100" in e501.hint

"""Every workload × target of workloads/ plans, or refuses with a positioned diagnostic.

Golden files under tests/golden/plan/ hold the rendered plan (or the diagnostic) of each
pair; ``ACCELCTL_UPDATE_GOLDEN=1`` rewrites them and removes stale ones (the one rule:
tests/golden_files.py).  Plans are compiled for a fixed host (``reference_hosts.REFERENCE``:
cores, CPU flags, memory), so the goldens hold whole plans, the same on any machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from golden_files import check_golden, check_no_stale
from reference_hosts import REFERENCE

from accelctl.api import load, plan, render_plan_text
from accelctl.errors import AccelctlError

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "plan"
PAIRS = [(wl.name, spec.name, t.name)
         for wl in sorted((ROOT / "workloads").glob("*.wl"))
         for spec in load(wl) for t in spec.targets]


def _render(file: str, workload: str, target: str, engine: str | None = None) -> str:
    (spec,) = [s for s in load(ROOT / "workloads" / file) if s.name == workload]
    try:
        text = render_plan_text(plan(spec, target, engine, host=REFERENCE))
    except AccelctlError as exc:
        text = "# refused\n" + exc.render()
    return text.replace(str(ROOT), "<repo>")


@pytest.mark.parametrize("file,workload,target", PAIRS, ids=[f"{a}:{b}:{c}" for a, b, c in PAIRS])
def test_plan_matches_golden(file, workload, target):
    check_golden(GOLDEN / _golden_name(file, workload, target), _render(file, workload, target) + "\n")


def _golden_name(file: str, workload: str, target: str) -> str:
    return f"{file[:-3]}.{workload}.{target}.txt"


def test_no_stale_golden_plans():
    """A golden plan of a pair that no longer exists (a renamed target, a removed workload) fails."""
    check_no_stale(GOLDEN, "*.txt", {_golden_name(*pair) for pair in PAIRS})


def test_matrix_covers_every_backend_and_expected_refusals():
    backends, refused = set(), set()
    for file, workload, target in PAIRS:
        text = _render(file, workload, target)
        if "error[E521]" in text:  # an engine past one machine: the per-node plan still exists
            text = _render(file, workload, target, "local")
        if text.startswith("# refused"):
            assert re.search(r"^workloads/|\.wl:\d+:\d+: error\[E\d{3}\]", text, re.M) or "error[" in text
            refused.add((workload, target))
        else:
            backends.add(re.search(r"backend (\w+)", text).group(1))
    assert {"cpu", "torchrun", "deepspeed", "deepspeed_inference", "gaudi", "te_fp8", "xla_neuron"} <= backends
    # the seeds' "does not fit" facts are refusals, not crashes
    assert ("bloomz_176b", "gaudi1") in refused
    assert ("t5_3b_summarization", "gaudi1") in refused


def test_seed_003_command_is_reproduced_exactly():
    (spec,) = [s for s in load(ROOT / "workloads" / "bloomz.wl") if s.name == "bloomz_176b"]
    (launch,) = plan(spec, "gaudi2_example").launches
    assert " ".join(launch.argv) == (
        "python ../gaudi_spawn.py --use_deepspeed --world_size 8 --master_port {free_port} run_generation.py "
        "--model_name_or_path bigscience/bloomz --use_hpu_graphs --use_kv_cache --max_new_tokens 100")


def test_seed_001_deepspeed_config():
    import json

    specs = {s.name: s for s in load(ROOT / "workloads" / "bert_1_5b_zero1.wl")}
    spec = next(s for s in specs.values() if any(t.nodes == 16 for t in s.targets))
    target = next(t for t in spec.targets if t.nodes == 16)
    try:
        p = plan(spec, target.name, "local")
    except AccelctlError:
        pytest.skip("the 16-node target needs a multi-node engine")
    cfg = json.loads(next(f.content for f in p.files if f.path == "ds_config.json"))
    assert cfg["train_micro_batch_size_per_gpu"] == 16 and cfg["gradient_accumulation_steps"] == 24
    assert cfg["train_batch_size"] == 16 * 24 * 128
    assert cfg["zero_optimization"]["stage"] == 1 and cfg["bf16"]["enabled"] is True

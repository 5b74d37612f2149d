"""``plan --check`` of a BLOOM kernel-injection target on its pinned stack: DeepSpeed's own
injection-policy selection, BLOOM container and model config, run in ``.venv-ds-legacy``
(transformers 4.43.4 over .venv's DeepSpeed; ``scripts/setup-ds-legacy.sh``, part of
``setup.sh --test``); the same check without the pinned transformers is rejected by DeepSpeed
itself, and NOT RUN where no side environment holds the pin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.backends.deepspeed import inject_check
from accelctl.dsl.parser import parse
from accelctl.plan.checks import check_plan
from accelctl.plan.compile import compile_plan
from accelctl.language.check import check

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ROOT / ".venv-ds-legacy"


def _bloomz(workload: str, target: str):
    specs = check(parse((ROOT / "workloads" / "bloomz.wl").read_text(encoding="utf-8"), "bloomz.wl"))
    spec = next(s for s in specs if s.name == workload)
    return spec, compile_plan(spec, target)


@pytest.mark.slow
def test_bloomz_a100_kernel_injection_passes_check_in_the_side_environment():
    assert (LEGACY / "transformers-4.43.4.dist-info").is_dir(), "run scripts/setup-ds-legacy.sh (setup.sh --test)"
    spec, plan = _bloomz("bloomz_176b", "a100")
    results = check_plan(plan, spec)
    by_tool = {r.tool: r for r in results}
    inject = next(r for t, r in by_tool.items() if t.startswith("DeepSpeed kernel injection on transformers 4.43.4"))
    assert inject.ok is True, inject.render()
    text = "\n".join(inject.messages)
    assert "imported transformers 4.43.4, tokenizers 0.19.1, DeepSpeed 0.19.8" in text
    assert "policy: BLOOMLayerPolicy for BloomBlock" in text
    assert "container DS_BloomContainer: heads 112, hidden 896, mp_size 8, dtype torch.float16" in text
    assert "create_module (the injected kernels): NOT RUN on this CPU" in text
    # every pin was checked: no NOT RUN result, so plan --check passes
    assert all(r.ok for r in results), [r.render() for r in results]


@pytest.mark.slow
def test_the_same_check_on_transformers_5_is_rejected_by_deepspeeds_bloom_container(tmp_path):
    spec, plan = _bloomz("bloomz_7b", "a100_8x")
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json(), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DS_ACCELERATOR": "cpu",
           "ACCELCTL_STACK_PINS": json.dumps({"transformers": "4.43.4"})}
    cp = subprocess.run([sys.executable, "-m", "accelctl.backends.deepspeed.inject_check", str(path)],
                        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    report = json.loads(cp.stdout.strip().splitlines()[-1])
    assert cp.returncode == 1
    assert any("not the pinned 4.43.4" in e for e in report["errors"])
    assert any("exceeds version 4.43.4" in e for e in report["errors"]), report


def test_not_run_where_no_side_environment_holds_the_pin(monkeypatch):
    monkeypatch.setattr(inject_check, "SIDE_ENVS", ())
    monkeypatch.delenv("ACCELCTL_SIDE_ENVS", raising=False)
    spec, plan = _bloomz("bloomz_7b", "a100_1x")
    (result,) = inject_check.check_results(plan, spec)
    assert result.ok is None and "transformers==4.43.4 (looked in: none listed" in result.messages[0]

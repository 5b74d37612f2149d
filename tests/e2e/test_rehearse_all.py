"""Every accelerator target of workloads/ rehearsed for real on this CPU (issue 23 item 3):
`accelctl run FILE -w W -t T --rehearse` ends ok, or -- where `plan` refuses the target -- is
refused the same way before a run folder exists.  Each rehearsal's wall time is printed (the
goal, 60 s here, is measured, not asserted: speed goals live in bench/); the subprocess
timeout only catches a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelctl import api
from accelctl.errors import PlanError
from accelctl.catalog import DEVICES

ROOT = Path(__file__).resolve().parents[2]
ALL_CASES = [(path.name, spec.name, t.name) for path in sorted((ROOT / "workloads").glob("*.wl"))
             for spec in api.load(path) for t in spec.targets if not DEVICES[t.device].host]


def _kind(case) -> tuple[str, str, str]:
    """What a rehearsal of ``case`` exercises: the target's backend (or the code refusing it),
    its device family and the task kind."""
    file, workload, target = case
    spec = next(s for s in api.load(ROOT / "workloads" / file) if s.name == workload)
    t = next(t for t in spec.targets if t.name == target)
    try:
        backend = api.plan(spec, target).backend
    except PlanError as refused:
        backend = "refused " + refused.diagnostics[0].code
    return backend, DEVICES[t.device].adapter, spec.task.kind


def _one_of_each(cases):
    seen, out = set(), []
    for case in cases:
        kind = _kind(case)
        if kind not in seen:
            seen.add(kind)
            out.append(case)
    return out


#: the whole set (~70 rehearsals, ~40 min here) with ACCELCTL_TEST_EXHAUSTIVE=1; else one target of
#: each (backend or refusal, device family, task kind): every path a rehearsal takes, in CI's time
CASES = ALL_CASES if os.environ.get("ACCELCTL_TEST_EXHAUSTIVE") == "1" else _one_of_each(ALL_CASES)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("file,workload,target", CASES, ids=[":".join(c) for c in CASES])
def test_every_accelerator_target_rehearses_here_or_is_refused_as_plan_refuses_it(file, workload, target, tmp_path):
    spec = next(s for s in api.load(ROOT / "workloads" / file) if s.name == workload)
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "accelctl.cli", "run", str(ROOT / "workloads" / file), "-w", workload, "-t", target,
            "--rehearse", "--headless", "--runs-dir", str(runs)]
    t0 = time.perf_counter()
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)
    wall = time.perf_counter() - t0
    try:
        api.plan(spec, target)
    except PlanError as refused:
        assert cp.returncode == 1 and f"error[{refused.diagnostics[0].code}]" in cp.stderr, cp.stderr[-2000:]
        assert refused.diagnostics[0].message in cp.stderr
        assert not runs.exists() or not any(runs.iterdir())
        return
    print(f"\nrehearsal of {file}:{workload}:{target}: {wall:.1f} s")
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["what_ran"]["rehearsal"]["of"] == target
    assert "sized for this CPU" in cp.stdout or "REHEARSAL" in cp.stdout

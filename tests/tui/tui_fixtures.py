"""Shared data of the TUI tests: recorded runs (``fixtures/store``, from a real short CPU run
each; re-record with ``record_fixtures.py``), the fixture workloads, and plans whose
worker is ``fake_worker.py`` replaying a recorded run live (fast, no torch)."""

from __future__ import annotations

import json
from pathlib import Path

from accelctl.contract.plan import Launch, Plan
from accelctl.frozen import replace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = HERE / "fixtures"
STORE = FIXTURES / "store"
WORKLOADS = FIXTURES / "workloads"
FAKE_WORKER = str(HERE / "fake_worker.py")


def recorded(prefix: str) -> Path:
    """The recorded run whose id contains ``prefix`` (e.g. ``tui_train-cpu-``)."""
    hits = sorted(p for p in STORE.iterdir() if prefix in p.name)
    assert len(hits) == 1, (prefix, hits)
    return hits[0]


def fake_plan(run: str, **options) -> Plan:
    """The recorded run's plan, launching ``fake_worker.py`` to replay its events."""
    src = recorded(run)
    plan = Plan.from_dict(json.loads((src / "plan.json").read_text()))
    job = replace(plan.job, debug=replace(
        plan.job.debug, fake={**plan.job.debug.fake, "replay": str(src / "events.jsonl"), **options}))
    launch = Launch(name="worker", argv=("python", FAKE_WORKER, "{run_dir}/job.json"))
    return replace(plan, launches=(launch,), job=job)


def spec_json(run: str) -> str:
    return (recorded(run) / "spec.json").read_text()



"""``accelctl run FILE -t T --rehearse --headless`` in a child process, for the rehearsal tests."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from accelctl import api
from accelctl.contract.events import LogMessage, read_events
from accelctl.contract.plan import Plan

ROOT = Path(__file__).resolve().parents[2]


def rehearse(path: Path, target: str, runs: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "accelctl.cli", "run", str(path), "-t", target, "--rehearse", "--headless",
            "--runs-dir", str(runs)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)


@dataclass
class Rehearsed:
    """A rehearsal that finished ok: the plan ``plan --rehearse`` made of it and what it recorded."""
    plan: Plan
    run_dir: Path
    summary: dict
    job: dict

    @property
    def world(self) -> int:
        return sum(launch.processes for launch in self.plan.launches)

    @property
    def changes(self) -> list[str]:
        return self.summary["what_ran"]["rehearsal"]["changes"]

    def said(self, prefix: str) -> list[str]:
        """The workers' log lines starting with ``prefix``, rank by rank."""
        return [e.message for r in range(self.world) for e in read_events(self.run_dir / f"rank{r}.jsonl")
                if isinstance(e, LogMessage) and e.message.startswith(prefix)]


def rehearsed(path: Path, target: str, runs: Path) -> Rehearsed:
    """The rehearsal of ``target`` of the workload at ``path``, run into ``runs``: it finished
    ok, marked as a rehearsal of it, with the job its plan made."""
    plan = api.plan(api.load(path)[0], target, rehearse=True)
    cp = rehearse(path, target, runs)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["what_ran"]["rehearsal"]["of"] == target
    job = json.loads((run_dir / "job.json").read_text())
    assert job["rehearsal_of"] == target and job["parallel"]["tp"] == plan.job.parallel.tp
    assert job["parallel"]["pp"] == plan.job.parallel.pp
    return Rehearsed(plan, run_dir, summary, job)

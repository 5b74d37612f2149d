"""Run a plan's preflight (``accelctl.plan.preflight``) and say, in one line, whether the
real run's world can form.

The preflight is an ordinary run of the preflight plan -- the same runner, engine (a Slurm
job of the same shape, the same torchrun agents) and failure explanations (a rendezvous
that times out names the nodes that never joined) -- stored apart from the real runs, under
``<runs root>/preflight/`` (``accelctl runs`` and the reports do not list it).  It must end
within ``timeout_s`` (queue time included); past that it is stopped and reported as such.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from accelctl.contract.plan import Plan
from accelctl.plan.preflight import preflight_plan
from accelctl.run.supervision.runner import launch
from accelctl.run.store import runs_root

DEFAULT_TIMEOUT_S = 300.0
SUBDIR = "preflight"


@dataclass(frozen=True)
class PreflightResult:
    ok: bool
    #: one line: what formed and how long it took, or why it did not
    message: str
    #: ranks that joined (rank 0's report), and the planned world
    world_size: int = 0
    planned_world: int = 0
    init_s: float | None = None
    all_reduce_s: float | None = None
    #: start of the preflight run to its end (queue, imports and rendezvous included)
    wall_s: float = 0.0
    run_dir: Path | None = None


def run_preflight(plan: Plan, planned: int = 0, runs_dir: str | os.PathLike[str] | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S, only: Iterable[str] | None = None) -> PreflightResult:
    """The preflight of ``plan``; ``planned``: the target's world size (0: not compared)."""
    pre = preflight_plan(plan)
    if pre is None:
        return PreflightResult(False, f"no preflight for target {plan.target}: its launches do not start "
                                      "accelctl's worker", planned_world=planned)
    t0 = time.monotonic()
    handle = launch(pre, source_text=None, spec_json=None, runs_root=runs_root(runs_dir) / SUBDIR, only=only)
    try:
        result = handle.wait(timeout=timeout_s)
        timed_out = False
    except TimeoutError:
        handle.stop()
        result = handle.wait()
        timed_out = True
    wall = time.monotonic() - t0
    report = (result.summary.get("results") or {}).get("preflight") or {}
    where = f"{plan.engine}, {plan.backend}"
    if result.status == "ok" and report:
        world = int(report["world_size"])
        ok = world == planned or not planned
        msg = (f"preflight ok: all-reduce over {world} rank(s) ({where}, {report.get('comm')}) in "
               f"{report['all_reduce_s'] * 1e3:.1f} ms, process group joined in {report['init_s']:.2f} s, "
               f"{wall:.1f} s in all" if ok else
               f"preflight: the launchers formed a world of {world}, the plan needs {planned}")
        return PreflightResult(ok, msg, world, planned, report["init_s"], report["all_reduce_s"], wall,
                               result.run_dir)
    failure = (result.summary.get("failure") or {}).get("message") or f"exit codes {list(result.returncodes)}"
    why = f"did not end within {timeout_s:g} s (stopped)" if timed_out else failure.strip().splitlines()[0]
    why += f" (log: {result.run_dir / 'worker.log'})"
    return PreflightResult(False, f"preflight failed ({where}) after {wall:.1f} s: {why}", 0, planned, wall_s=wall,
                           run_dir=result.run_dir)

"""``summary.json``: what a finished run leaves behind, built from its events.

``schema_version`` 1: the run's identity and ``status`` (ok / failed / stopped), start and end
times, ``timings`` (wall, rank 0's phases), ``measure`` as planned, ``world_size``, ``stats``
(``accelctl.analysis.stats.StepStats``), rank 0's ``env``/``details``/``results``, the first
``failure`` (a real one over ``stopped``) and ``stopped_by``, ``warnings``, ``resumed``,
``launches`` and ``returncodes``, and, where they apply, ``scheduler`` (added by
``store.write_summary``) and ``tracking`` (added by the runner).  Every key, in full:
docs/internals/run-and-engines.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from accelctl.analysis.stats import steady_state
from accelctl.contract.events import Event, LogMessage, PhaseChanged, RunFailed, RunFinished, RunResumed, RunStarted
from accelctl.analysis.provenance import what_ran
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Plan

SCHEMA_VERSION = 1
MAX_WARNINGS = 50


def run_status(stop_kind: str | None, failure: RunFailed | None, returncodes: Sequence[int]) -> str:
    """``stopped`` when a user stopped the run (or a worker reported being stopped),
    else ``failed`` when anything failed, else ``ok``.  A launch that never started here (None:
    one another node's runner starts, ``accelctl run --launch``; or one cancelled by a failure
    or a stop, which ``failure`` / ``stop_kind`` already tell) is not a failure by itself."""
    if stop_kind == "user" or (failure is not None and failure.reason == "stopped"):
        return "stopped"
    if failure is not None or any(rc not in (0, None) for rc in returncodes):
        return "failed"
    return "ok"


def phase_times(events: Iterable[Event], end_unix_s: float) -> dict[str, float]:
    """Seconds rank 0 spent in each phase (``setup_s``, ``warmup_s``...); a phase entered
    again (one ``measure`` per repeat) adds up.  The last phase ends at ``end_unix_s``."""
    phases = [e for e in events if isinstance(e, PhaseChanged) and e.rank == 0]
    out: dict[str, float] = {}
    for cur, nxt in zip(phases, [*phases[1:], None]):
        if cur.phase == "done":
            continue
        end = nxt.time_unix_s if nxt is not None else end_unix_s
        out[f"{cur.phase}_s"] = out.get(f"{cur.phase}_s", 0.0) + max(0.0, end - cur.time_unix_s)
    return out


def _first(events: Sequence[Event], cls: type, rank: int = 0) -> Any:
    return next((e for e in events if isinstance(e, cls) and getattr(e, "rank", 0) == rank), None)


def build_summary(
    *,
    plan: Plan,
    job: WorkerJob,
    run_id: str,
    events: Sequence[Event],
    stop_kind: str | None,
    failure: RunFailed | None,
    launches: Sequence[dict[str, Any]],
    started_unix_s: float,
    finished_unix_s: float,
) -> dict[str, Any]:
    returncodes = [ln["returncode"] for ln in launches]
    started = _first(events, RunStarted)
    finished = _first(events, RunFinished)
    end = finished or _first(events, RunFailed)
    warnings = list(plan.warnings)
    for e in events:
        if isinstance(e, LogMessage) and e.level.lower().startswith("warn") and e.message not in warnings:
            if len(warnings) < MAX_WARNINGS:
                warnings.append(e.message)
    ranks = {e.rank for e in events if isinstance(e, RunStarted)}
    resumed = [{"step": e.step, "path": e.path, "time_unix_s": e.time_unix_s}
               for e in events if isinstance(e, RunResumed) and e.rank == 0]
    return {
        **({"resumed": resumed} if resumed else {}),
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "status": run_status(stop_kind, failure, returncodes),
        "workload": plan.workload,
        "target": plan.target,
        "backend": plan.backend,
        "engine": plan.engine,
        "device": plan.device,
        "task": job.task.kind,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_unix_s)),
        "started_unix_s": started_unix_s,
        "finished_unix_s": finished_unix_s,
        "timings": {
            "wall_s": finished_unix_s - started_unix_s,
            **phase_times(events, end.time_unix_s if end is not None else finished_unix_s),
        },
        "measure": {"warmup": job.measure.warmup, "steps": job.measure.steps, "repeat": job.measure.repeat},
        "world_size": started.world_size if started is not None else len(ranks),
        "stats": steady_state(events).to_dict(),
        "env": started.env if started is not None else {},
        "details": started.details if started is not None else {},
        "what_ran": what_ran(started.details if started is not None else {}, job, plan.rehearsal),
        "results": finished.results if finished is not None else {},
        "failure": None
        if failure is None
        else {"reason": failure.reason, "message": failure.message, "rank": failure.rank, "step": failure.step},
        "stopped_by": stop_kind,
        "warnings": warnings,
        "launches": [dict(ln) for ln in launches],
        "returncodes": returncodes,
    }

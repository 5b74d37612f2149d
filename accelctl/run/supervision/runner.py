"""The runner: where a run's processes are started (by ``accelctl.run.supervision.supervisor``, the only
module of accelctl that starts a run's launches) and supervised.

``launch(plan, ...)`` materialises a plan into a run folder (``accelctl.run.store``), starts each
``Launch`` in its own session (one marked ``wait`` must exit 0 before the later ones start) and
returns a ``RunHandle`` at once.  Every ``POLL_S`` its thread pumps the events
(``accelctl.run.supervision.eventpump``), polls the processes and escalates a stop (SIGINT, SIGTERM after
``grace_s``, SIGKILL after twice that); ``accelctl.run.store.outcome`` decides what the run records.  A
launcher whose ranks all finished is not waited for past ``LAUNCHER_TEARDOWN_S``.  Launches carry
``ACCELCTL_RUNNER`` and the parent-death signal, and ``runner.json`` names the runner, so a run
whose runner died is found lost; ``wait()`` always returns.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelctl.contract import checkpoint as layout
from accelctl.contract import diskspace, envnames, supervision
from accelctl.contract.events import Event, RunFailed
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Launch, Plan
from accelctl.private_files import store_opener
from accelctl.run import store
from accelctl.run.supervision import scheduled
from accelctl.run.supervision.commands import (
    EVENTS_DIR_ENV,
    ResolvedLaunch,
    UnresolvedPlaceholder,
    launch_env,
    resolve_argv,
    resolve_launch,
    run_values,
)
from accelctl.run.supervision.eventpump import EventPump
from accelctl.run.store.outcome import (  # noqa: F401 - Crash, crashed_rank: importable from here, as before
    Crash,
    crashed_rank,
    first_start,
    launch_exit,
    launch_failed,
    only_teardown_left,
    record_launch_end,
)
from accelctl.run.store.ownership import Ownership, claim
from accelctl.run.supervision.rankwatch import RankWatch
from accelctl.run.store.summary import build_summary
from accelctl.run.supervision.supervisor import EXEC_PROLOGUE, ProcessSupervisor, with_exec_prologue  # noqa: F401 - as before
from accelctl.run.tracking import check_available, start_tracking

__all__ = ["EVENTS_DIR_ENV", "RunHandle", "RunResult", "launch", "launch_env", "resolve_argv"]

log = logging.getLogger("accelctl.run")

POLL_S = 0.2
#: how long every rank's process must have been gone before a launcher still running is ended
#: (``RunHandle._ranks_done``): a launcher that exits by itself meanwhile gives its own exit code
LAUNCHER_TEARDOWN_S = 0.3
DEFAULT_GRACE_S = 5.0
LOG_TAIL_LINES = 30

with_default_sigint = with_exec_prologue  # the name it had before it also set the parent-death signal


@dataclass(frozen=True)
class RunResult:
    #: ok, failed or stopped
    status: str
    run_dir: Path
    #: the content of summary.json
    summary: dict[str, Any] = field(repr=False)
    #: one per launch, in plan order; 127: the command could not be started; None: never
    #: started (an earlier launch failed, or the run was stopped first)
    returncodes: tuple[int | None, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# --------------------------------------------------------------------------- the handle


class RunHandle:
    """A started run.  ``events()`` streams, ``wait()`` blocks for the result, ``stop()`` ends it.

    A facade over the run's process supervisor (``accelctl.run.supervision.supervisor``), its event pump
    (``accelctl.run.supervision.eventpump``) and the pure outcome (``accelctl.run.store.outcome``): it starts the
    launches in order, runs the supervisor thread that ticks them, and ends the run."""

    def __init__(self, plan: Plan, run_dir: Path, job: WorkerJob, sinks: Iterable[Any] = (), grace_s: float = DEFAULT_GRACE_S,
                 values: Mapping[str, str] | None = None, only: Iterable[str] | None = None,
                 prior_events: Iterable[Event] = (), shared: Any = None, owner: Ownership | None = None):
        self.plan = plan
        #: this process's claim on the run folder (``accelctl.run.store.ownership``), given up once the
        #: summary is written: no second ``run --resume`` meanwhile
        self.owner = owner
        #: the worker process this run shares with the other runs of its file
        #: (``accelctl.run.supervision.shared.SharedWorker``), or None: a process of its own
        self.shared = shared
        #: a resumed run's events before its resume point (``accelctl.run.supervision.resume``): in the summary
        self.prior_events = list(prior_events)
        #: the launches this runner starts (None: all); the others run elsewhere (one per node)
        self.only = None if only is None else frozenset(only)
        #: the placeholders picked once for this run ({free_port})
        self.values = dict(values or {})
        self.run_dir = run_dir
        self.run_id = run_dir.name
        self.job = job
        self.events_dir = run_dir
        self.resolved: list[ResolvedLaunch | None] = [None] * len(plan.launches)
        self._procs = ProcessSupervisor(len(plan.launches), grace_s)
        self._next = 0  # the next launch to start
        self._halted = False  # a failure or a stop: no further launch starts
        self._finishing = False
        self._started_at = time.time()
        #: live logging to experiment trackers (``track { ... }``), off this thread; None: none
        self._tracker = start_tracking(plan, run_dir, self._started_at, self.only)
        for event in self.prior_events if self._tracker is not None else ():
            self._tracker.on_event(event)  # a resumed run's MLflow run holds the whole run
        self._lock = threading.RLock()
        self._pump = EventPump(run_dir, [*sinks, self._tracker] if self._tracker is not None else sinks,
                               lambda: self._begin_stop("failure"), shared=shared is not None)
        #: which rank's process went first, for a launcher that does not say (DeepSpeed's)
        self._ranks = RankWatch()
        #: a launch that starts several ranks is watched rank by rank; a single process is its own
        #: rank, its exit status says how it ended (the watch costs supervisor CPU, which a run
        #: pinned to one core pays in its steps)
        self._watch_ranks = any(launch.processes > 1 for launch in plan.launches)
        self._stop_kind: str | None = None  # "user" or "failure"
        self._result: RunResult | None = None
        #: this process, as its launches and the run store know it (``<pid>:<start ticks>``)
        self._runner_identity = supervision.identity()
        self._thread = threading.Thread(target=self._supervise, name=f"accelctl-run-{self.run_id}", daemon=True)

    # -- public --------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        return self._procs.pids

    @property
    def done(self) -> bool:
        return self._result is not None

    @property
    def grace_s(self) -> float:
        return self._procs.grace_s

    def events(self) -> Iterator[Event]:
        """Every event of the run from its start, blocking for new ones until the run ends."""
        return self._pump.stream(lambda: self._result is not None)

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run has ended and ``summary.json`` is written.

        ``KeyboardInterrupt`` while waiting stops the run (``stop()``), waits for the
        processes to end and *returns* the result, status ``stopped`` (callers map that
        to exit code 130); a second ``KeyboardInterrupt`` kills the process groups at
        once.  ``TimeoutError`` when ``timeout`` passes first (the run goes on).
        """
        try:
            self._wait_done(timeout)
        except KeyboardInterrupt:
            self.stop()
            while True:
                try:
                    self._wait_done(None)
                    break
                except KeyboardInterrupt:
                    self.stop(grace_s=0.0)
        assert self._result is not None
        return self._result

    def stop(self, grace_s: float | None = None) -> None:
        """Ask the run to end: SIGINT now, SIGTERM after ``grace_s``, SIGKILL after twice
        ``grace_s``.  Returns at once; ``wait()`` gives the result (status ``stopped``)."""
        if grace_s is not None:
            self._procs.grace_s = grace_s  # escalation is measured from the first stop request
        self._begin_stop("user")

    def fail_store(self, exc: OSError, name: str) -> None:
        """A file of the run that the caller writes (``series.json``) cannot be written: the run
        stops and ends ``failed``, ``store_error`` ("run store: <why> writing <name>")."""
        self._pump.store_failed(exc, name)

    def __enter__(self) -> "RunHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving a ``with`` block stops a run that is still going, then waits for it."""
        if not self.done:
            self.stop()
        self.wait()

    # -- starting --------------------------------------------------------------------

    def _start(self) -> None:
        if not self._halted:  # (halted before the start: the store could not take what it needed)
            self._start_more()
        self._thread.start()

    def _kill_all(self, sig: int) -> None:
        self._procs.kill_all(sig)

    def _start_more(self) -> None:
        """Start launches in order, up to and including the next one marked ``wait``.  A
        ``worker.log`` the store cannot take (a full disk) fails the run ``store_error`` before
        the launch starts (its output would be lost)."""
        try:
            logf = open(self.run_dir / store.LOG_FILE, "ab", buffering=0, opener=store_opener)  # noqa: SIM115
        except OSError as exc:
            self._pump.store_failed(exc, store.LOG_FILE)
            return
        with self._lock, logf:
            while self._next < len(self.plan.launches) and not self._halted:
                i, launch = self._next, self.plan.launches[self._next]
                self._next += 1
                if self.only is not None and launch.name not in self.only:
                    continue  # started elsewhere (another node), not by this runner
                try:
                    if not self._start_one(i, launch, logf):
                        return  # the store is full: the run ends store_error, this launch never starts
                except (OSError, UnresolvedPlaceholder) as exc:
                    self._procs.rcs[i] = 127
                    self._pump.emit(RunFailed(reason="launch_error", message=f"cannot start {launch.name!r}: {exc}"))
                    self._begin_stop("failure")
                    return
                if launch.wait:
                    return  # the launches after it start when it has exited 0

    def _start_one(self, i: int, launch: Launch, logf) -> bool:
        """Start launch ``i`` (or take the shared worker already running it); False when
        ``worker.log`` cannot take its line (the run fails ``store_error``)."""
        if self.shared is not None and self.shared.proc is not None:
            # started by an earlier run of this file; it runs this run's job next
            self.resolved[i] = self.shared.launch
            self._procs.adopt(i, self.shared.proc)
            self._log_line(logf, f"# accelctl: launch {launch.name}: the shared worker, pid "
                                 f"{self.shared.proc.pid} ({self.shared.jobs_file})")
            self._record_runner()
            return True
        r = resolve_launch(launch, self.run_dir, self.events_dir, run_values=self.values)
        if self.shared is not None:
            r = self.shared.take(r)  # the same command, with the job list for its job
        self.resolved[i] = r
        if not self._log_line(logf, f"# accelctl: launch {launch.name}: {Launch(r.name, r.argv, cwd=r.cwd or '').shell()}"):
            return False
        if self.plan.request is not None:  # submitted and followed here, run by the cluster
            self._procs.adopt(i, scheduled.start(self.plan, self.run_dir, r.env, self.run_dir / store.LOG_FILE))
        else:
            self._procs.start(i, r.argv, {**r.env, envnames.RUNNER: self._runner_identity}, r.cwd, logf)
        if self.shared is not None:
            self.shared.proc = self._procs.procs[i]
        self._record_runner()
        return True

    def _log_line(self, logf, text: str) -> bool:
        """One line of accelctl's own into ``worker.log``; False (the run failing ``store_error``)
        when the store cannot take it."""
        try:
            logf.write(f"{text}\n".encode())
            return True
        except OSError as exc:
            self._pump.store_failed(exc, store.LOG_FILE)
            return False

    def _record_runner(self) -> None:
        """``runner.json``: who supervises this run, and its launches' process groups -- how a
        later ``accelctl runs`` tells a run in progress from one whose runner was killed."""
        try:
            store.write_runner(self.run_dir, self._runner_identity, self.pids)
        except OSError as exc:
            self._pump.store_failed(exc, store.RUNNER_FILE)

    # -- supervisor thread --------------------------------------------------------------

    def _supervise(self) -> None:
        try:
            while True:
                if self._watch_ranks and self._stop_kind != "user":  # before the events a death causes are read
                    self._ranks.poll(self.pids)
                self._pump.drain()
                self._pump.check_folder()
                self._check_processes()
                self._escalate()
                with self._lock:
                    if not self._procs.running() and (self._halted or self._next >= len(self.plan.launches)):
                        self._finishing = True
                        break
                time.sleep(POLL_S)
            self._pump.drain(final=True)
        except BaseException as exc:  # noqa: BLE001 - the run must still end cleanly
            if isinstance(exc, OSError):  # reading the ranks' files, the run folder gone...
                self._pump.store_failed(exc, "the run folder")
            else:
                log.exception("runner supervisor failed")
                self._pump.emit(RunFailed(reason="runner_error", message=f"{type(exc).__name__}: {exc}"))
            self._procs.kill_all(signal.SIGKILL)
            self._procs.wait_all()
        finally:
            self._finish()

    def _check_processes(self) -> None:
        pump = self._pump
        for i in self._procs.running():
            rc = launch_exit(self._procs.poll(i), pump.job_code, self._procs.stop_at is not None)
            if rc is None and self._ranks_done(i):
                rc = self._procs.end_launcher(i)
                log.debug("run %s: every rank finished and exited; launcher %r ended without its teardown",
                          self.run_id, self.plan.launches[i].name)
            if rc is None:
                continue
            self._procs.exited(i, rc)
            if rc == 0:
                if self.plan.launches[i].wait and not self._halted:
                    self._start_more()
                continue
            pump.drain()  # its last words may have landed since the previous tick
            if pump.store_error is not None:
                pass  # the ranks fail because the store does: that is the run's reason already
            elif pump.failure is None and diskspace.nearly_full(self.run_dir):
                # a rank that met the full store before it could say so (its rank file takes nothing
                # more), while events.jsonl still had room in its last block
                pump.store_failed(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), "the ranks' events")
            else:  # what the exit adds to the run's outcome (accelctl.run.store.outcome, no process needed)
                user = self._stop_kind == "user"
                ended = launch_failed(self.plan.launches[i].name, rc, pump.events, pump.failure,
                                      "" if user else store.log_tail(self.run_dir, 400),
                                      "" if user else store.log_tail(self.run_dir, LOG_TAIL_LINES),
                                      self._ranks.first_gone(), lambda: self._explain(i), stopped_by_user=user)
                if ended.event is not None:
                    pump.emit(ended.event)
                    pump.failure = record_launch_end(pump.failure, ended)
            self._begin_stop("failure")

    def _explain(self, failed: int) -> str | None:
        """The plan's engine's reading of a launch that exited without reporting why (a torchrun
        rendezvous that timed out names the nodes that never joined)."""
        from accelctl.plan.registry import ENGINES

        engine = ENGINES.get(self.plan.engine)
        if engine is None:
            return None
        procs, rcs = self._procs.procs, self._procs.rcs
        started = {ln.name: procs[i] is not None and (i == failed or rcs[i] is None)
                   for i, ln in enumerate(self.plan.launches)}
        try:
            return engine.explain_failure(self.plan, store.log_tail(self.run_dir, 400), started, dict(self.values))
        except Exception:  # noqa: BLE001 - an explanation must never break the run's ending
            log.exception("engine %s could not explain a failure", self.plan.engine)
            return None

    def _begin_stop(self, kind: str) -> None:
        """Start (once) the SIGINT → SIGTERM → SIGKILL sequence; ``kind`` is user or failure.
        No further launch starts after this."""
        with self._lock:
            if self._result is not None or self._finishing:
                return  # the run has already ended; nothing to stop
            self._halted = True
            running = self._procs.running()
            cancels = self._next < len(self.plan.launches) and any(r is None for r in self._procs.rcs[self._next:])
            if kind == "user" or (self._stop_kind is None and (running or cancels)):
                self._stop_kind = kind
            self._procs.begin_stop()

    def _escalate(self) -> None:
        failed_at = self._pump.failed_at
        if self._procs.stop_at is None and failed_at is not None and time.monotonic() - failed_at > self.grace_s:
            self._begin_stop("failure")  # a rank reported a failure but some process lingers
        with self._lock:
            self._procs.escalate()

    def _ranks_done(self, i: int) -> bool:
        """Every rank of launch ``i`` (the run's last) reported ``RunFinished`` and its process has
        been gone ``LAUNCHER_TEARDOWN_S`` while the launcher still runs: what is left is its own
        teardown (DeepSpeed's polls its ranks once a second).  Only where the ranks are this
        machine's descendants of the launch (``RankWatch``); other launchers are waited for."""
        launch = self.plan.launches[i]
        plain = (self.shared is None and not launch.wait and self._stop_kind is None
                 and self._pump.failure is None)
        sole = self._next >= len(self.plan.launches) and self._procs.running() == [i]
        return only_teardown_left(launch.processes, self._pump.finished_ranks,
                                  lambda ranks: self._ranks.all_gone(ranks, LAUNCHER_TEARDOWN_S),
                                  sole_survivor=sole, plain=plain)

    # -- the end ---------------------------------------------------------------------

    def _finish(self) -> None:
        """Reap, write ``summary.json`` where the store allows, and hand out the result --
        always: ``wait()`` returns whatever failed here."""
        pump = self._pump
        summary: dict[str, Any] = {}
        try:
            if self.shared is None or not self.shared.running():
                self._procs.reap(self.events_dir, self.run_id)
                self._drop_cut_saves()
            # else: the shared worker goes on with the next run's job; ``SharedWorker.close`` reaps it
            pump.close_files()
            summary = self._summary()
            pump.close_out()  # its last buffered line may meet a full disk too: then a store error
            if pump.store_error is None:
                store.write_summary(self.run_dir, summary)
            else:
                summary = self._summary()
                try:  # recorded where possible: a full events.jsonl may leave room for the summary
                    store.write_summary(self.run_dir, summary)
                except OSError:
                    log.warning("run store: summary.json of %s not written either", self.run_dir.name)
                    store.mark_runner_ended(self.run_dir, pump.store_error)
        except OSError as exc:
            pump.store_failed(exc, store.SUMMARY_FILE)
            summary = self._safe_summary()
            store.mark_runner_ended(self.run_dir, pump.store_error or "")
        except Exception as exc:  # noqa: BLE001
            log.exception("could not write the summary of %s", self.run_dir)
            summary = summary or {"status": "failed", "failure": {"reason": "runner_error", "message": str(exc)}}
        finally:
            summary = self._finish_tracking(summary)
            result = RunResult(summary.get("status", "failed"), self.run_dir, summary, tuple(self._procs.rcs))
            try:
                pump.sinks.close(result)
            finally:
                if self.owner is not None:
                    self.owner.release()  # the run is recorded: it may be resumed now
                with pump.cond:
                    self._result = result
                    pump.cond.notify_all()

    def _drop_cut_saves(self) -> None:
        """Every process of the run is gone: a save cut short is removed here, whoever started it
        (a rank ended by its launcher in the middle of its part of a save cannot remove it).  Not
        where launches run elsewhere (``only``): another node's ranks may still be saving."""
        if self.job.checkpoint.every <= 0 or self.only is not None:
            return
        for cut in layout.incomplete(layout.folder_of(self.job)):
            shutil.rmtree(cut, ignore_errors=True)

    def _finish_tracking(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The trackers log the end of the run (after ``summary.json`` is written: it is one of
        their artifacts); a tracker that failed meanwhile is added to ``summary.json``'s warnings."""
        if self._tracker is None or not summary:
            return summary
        try:
            self._tracker.finish(summary, self.run_dir)
            final = self._tracker.annotate(summary)
            if final != summary and (self.run_dir / store.SUMMARY_FILE).is_file():
                store.write_summary(self.run_dir, final)
            return final
        except Exception:  # noqa: BLE001 - tracking never changes how a run ends
            log.exception("tracking the end of %s", self.run_id)
            return summary

    def _safe_summary(self) -> dict[str, Any]:
        try:
            return self._summary()
        except Exception as exc:  # noqa: BLE001
            return {"status": "failed", "failure": {"reason": "runner_error", "message": str(exc)}}

    def _wait_done(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._pump.cond:
            while self._result is None:
                left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
                if left <= 0:
                    raise TimeoutError(f"run {self.run_id} still running after {timeout} s")
                self._pump.cond.wait(left)

    def _summary(self) -> dict[str, Any]:
        started = first_start(self._started_at, self._pump.events, self.shared is not None)
        procs = self._procs
        for t in procs.times if self.shared is not None else ():
            t[:1] = [min(t[0], started)] if t else []
        launches = [
            {
                "name": ln.name,
                "argv": list(r.argv) if r else None,
                "cwd": r.cwd if r else None,
                "pid": p.pid if p else None,
                "returncode": rc,
                "wall_s": t[1] - t[0] if len(t) == 2 else None,
                # the job list of the worker this run shared with the other runs of its file
                **({"jobs_file": str(self.shared.jobs_file)} if self.shared is not None else {}),
            }
            for ln, r, p, rc, t in zip(self.plan.launches, self.resolved, procs.procs, procs.rcs, procs.times)
        ]
        summary = build_summary(
            plan=self.plan,
            job=self.job,
            run_id=self.run_id,
            events=[*self.prior_events, *self._pump.events],
            stop_kind=self._stop_kind,
            failure=self._pump.failure,
            launches=launches,
            started_unix_s=started,
            finished_unix_s=time.time(),
        )
        return self._tracker.annotate(summary) if self._tracker is not None else summary


# --------------------------------------------------------------------------- entry point


def launch(
    plan: Plan,
    *,
    source_text: str | None,
    spec_json: str | Mapping[str, Any] | None,
    runs_root: str | os.PathLike[str] | None = None,
    sinks: Iterable[Any] = (),
    grace_s: float = DEFAULT_GRACE_S,
    only: Iterable[str] | None = None,
    into: Path | None = None,
    prior_events: Iterable[Event] = (),
    owner: Ownership | None = None,
) -> RunHandle:
    """Materialise ``plan`` into a new run folder, start its launches, return at once.

    ``only``: the launches to start here (None: all; an unknown name: ``ValueError``); ``sinks``:
    ``accelctl.run.supervision.sinks``; ``into``: an existing folder to launch into (``accelctl.run.supervision.resume``;
    ``source_text``/``spec_json`` None keep its own), ``prior_events`` entering its summary.
    Generated files escaping the folder raise ``RunStoreError`` before anything starts.  ``owner``
    (else a claim taken here) holds the folder until the summary is written; ``RunBusy`` when
    another process holds it.
    """
    if only is not None:
        only = list(only)
        unknown = sorted(set(only) - {ln.name for ln in plan.launches})
        if unknown or not only:
            raise ValueError(f"no launch named {', '.join(unknown) or '(none given)'} in the plan "
                             f"(launches: {', '.join(ln.name for ln in plan.launches)})")
    check_available(plan, only)  # a tracker the workload asks for and this Python lacks: E594, not a silent skip
    try:
        run_dir = into if into is not None else store.new_run_dir(plan.workload, plan.target, runs_root)
    except OSError as exc:  # a full disk, a store that is not ours to write
        raise store.RunStoreError(f"run store: {exc.strerror or exc} creating a run folder under "
                                  f"{store.runs_root(runs_root)}") from exc
    values = run_values(plan)  # {free_port}: one port for every launch and file of this run
    try:
        if owner is None:
            owner = claim(run_dir)
        job = store.write_inputs(run_dir, plan, source_text=source_text, spec_json=spec_json, events_dir=run_dir,
                                 run_values=values)
        store.write_runner(run_dir, supervision.identity(), [])
        handle = RunHandle(plan, run_dir, job, sinks, grace_s, values, only, prior_events, owner=owner)
    except BaseException as exc:
        if into is None:
            shutil.rmtree(run_dir, ignore_errors=True)
        if owner is not None:
            owner.release()
        if isinstance(exc, OSError):
            name = Path(exc.filename).name if getattr(exc, "filename", None) else "the run folder"
            raise store.RunStoreError(f"run store: {exc.strerror or exc} writing {name} in {run_dir}") from exc
        raise
    try:
        handle._start()
    except BaseException:  # e.g. KeyboardInterrupt between two launches: leave nothing behind
        handle._kill_all(signal.SIGKILL)
        if handle._tracker is not None:
            handle._tracker.abandon()
        if not handle._thread.is_alive():
            handle._pump.close_out(quiet=True)
            owner.release()
        raise
    return handle

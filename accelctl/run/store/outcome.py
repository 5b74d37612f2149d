"""How a run ends, decided from what it left -- events, exit codes, the log -- without a process
(``RunHandle`` is split into the process supervisor, the event pump and this).

``launch_failed``, ``crashed_rank`` (from the events and the launchers' reports in
``worker.log``), ``run_failure`` (the cause, not its consequences), ``run_status``,
``record_launch_end``, ``job_exit_code`` / ``launch_exit`` (runs sharing a worker),
``only_teardown_left`` and ``first_start``: each a pure function of its arguments, so
tests/run/test_outcome.py calls them with recorded events and log text.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import NamedTuple

from accelctl.contract.events import Event, RunFailed, RunFinished
from accelctl.contract.ids import JOB_EXIT_CODES
from accelctl.run.store.summary import run_status  # noqa: F401 - the run's status, stated once

#: a failed child in torchrun's ChildFailedError report ("rank : 1 (local_rank: 1)" then
#: "exitcode : -9 (pid: 8212)"); the first one after "Root Cause" is the one that died first
_RANK_EXIT = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:[^)]*\)\s*\n\s*exitcode\s*:\s*(-?\d+)")
#: the DeepSpeed launcher's (``deepspeed.launcher.launch``) line when one of its ranks ends
#: non-zero, before it kills the others: that rank's exit code, but not its rank
#: ("[ERROR] [launch.py:259:sigkill_handler] [...] exits with return code = -9")
_LAUNCHER_EXIT = re.compile(r"\] exits with return code = (-?\d+)\s*$", re.M)


class Crash(NamedTuple):
    """Which rank ended a launch without saying why, and how (``crashed_rank``)."""

    #: None when it cannot be told
    rank: int | None
    #: "rank 1 killed by SIGKILL"; "" when the rank cannot be told
    how: str = ""
    #: the rank is the cause of what its peers then report: killed by a signal, or seen gone
    #: first without a word (gloo's "Connection reset by peer" on rank 0 is its consequence)
    cause: bool = False


_UNKNOWN = Crash(None)


def _how(rank: int, code: int | None) -> Crash:
    if code is None:
        return Crash(rank, f"rank {rank} ended without reporting why")
    if code < 0:
        try:
            return Crash(rank, f"rank {rank} killed by {signal.Signals(-code).name}", cause=True)
        except ValueError:
            return Crash(rank, f"rank {rank} killed by signal {-code}", cause=True)
    return Crash(rank, f"rank {rank} exited with code {code} without reporting why")


def crashed_rank(events: list[Event], returncode: int, log_text: str,
                 first_gone: Mapping[int, int | None] | Collection[int] = ()) -> Crash:
    """``Crash(1, "rank 1 killed by SIGKILL", cause=True)`` for a launch that ended without a rank saying
    why: the rank whose worker process was seen gone first without a word (among
    ``first_gone``, the supervisor's ``RankWatch``: the ranks seen gone in its earliest poll;
    of several, the one a signal killed), else the one silent rank torchrun's report lists as
    killed by a signal, else the rank a launcher's failure report names first
    (torchrun's "Root Cause"), else the one rank that went silent; with the code the launcher
    reported for it (torchrun's per-rank exitcode, the DeepSpeed launcher's "exits with return
    code = -9", which names no rank) or else the launch's own signal (a launch that is the
    worker itself); ``Crash(None)`` when that cannot be told.  ``cause``: the rank was killed
    by a signal or seen gone first, so its peers' reports are its consequences."""
    seen = {e.rank for e in events if isinstance(getattr(e, "rank", None), int)}
    ended = {e.rank for e in events if isinstance(e, (RunFinished, RunFailed))}
    silent = sorted(seen - ended)
    #: each rank's exit code as torchrun's report lists it (every rank that failed before it
    #: stopped the others), else as the rank watch saw it (a zombie's wait status)
    codes = {int(m.group(1)): int(m.group(2)) for m in _RANK_EXIT.finditer(log_text)}
    seen_codes = dict(first_gone) if isinstance(first_gone, Mapping) else {}
    first_silent = [r for r in first_gone if r in silent]
    if len(first_silent) > 1:
        # seen gone in one poll and neither has said why (yet: a peer's report may be read only
        # after the launch's exit): the one a signal killed, if only one was
        first_silent = [r for r in first_silent if _signalled(codes.get(r, seen_codes.get(r)))]
    if len(first_silent) == 1:
        # among the first seen gone, the one without a word: the cause of what its peers then
        # report (gloo's "Read error" on rank 0 when rank 1 is SIGKILLed, which torchrun may
        # list as the root cause when both end within one of its polls)
        (rank,) = first_silent
        reported = [int(c) for c in _LAUNCHER_EXIT.findall(log_text) if int(c) < 0]
        seen_code = seen_codes.get(rank)
        code = codes.get(rank, seen_code if seen_code is not None else
                         reported[0] if reported else (returncode if returncode < 0 else None))
        if code is None:
            return Crash(rank, f"rank {rank} went first, without reporting why", cause=True)
        return _how(rank, code)
    killed = [r for r in silent if _signalled(codes.get(r))]
    if len(killed) == 1:
        # torchrun's "Root Cause" is the failure with the earliest time in whole seconds, the
        # lowest rank on a tie: a rank SIGKILLed and the peer that failed on it within one of its
        # monitor passes are named rank 0 whatever their order.  The rank it lists as killed by a
        # signal without a word of its own is the cause (it ended before torchrun stopped anyone)
        return _how(killed[0], codes[killed[0]])
    root = log_text.rsplit("Root Cause", 1)[-1] if "Root Cause" in log_text else ""
    found = _RANK_EXIT.search(root) or next((m for m in _RANK_EXIT.finditer(log_text) if int(m.group(2)) < 0), None)
    if found is not None:
        return _how(int(found.group(1)), int(found.group(2)))
    if len(silent) == 1:
        reported = _LAUNCHER_EXIT.findall(log_text)
        code = int(reported[0]) if reported else (returncode if returncode < 0 else None)
        return _how(silent[0], code)
    return _UNKNOWN


def _signalled(code: int | None) -> bool:
    """An exit code that says a signal ended the process (``subprocess``'s -N)."""
    return code is not None and code < 0


class LaunchEnded(NamedTuple):
    """What a launch's non-zero exit adds to the run: the failure event to record (None: nothing
    new, a failure already reported says it), and whether that event is the run's cause."""

    event: RunFailed | None
    cause: bool = False


def launch_failed(name: str, returncode: int, events: Sequence[Event], failure: RunFailed | None,
                  log_text: str, log_tail: str, first_gone: Mapping[int, int | None] | Collection[int] = (),
                  explain: Callable[[], str | None] = lambda: None, stopped_by_user: bool = False) -> LaunchEnded:
    """Launch ``name`` exited with ``returncode`` (non-zero, negative: a signal).  ``failure``: the
    failure the run has recorded so far; ``log_text``/``log_tail``: the end of ``worker.log`` to
    read reports in / to quote; ``explain()``: the engine's reading of the log, asked only for a
    crash; ``stopped_by_user``: the user stopped the run.

    A user's stop is recorded ``stopped`` (once).  Otherwise, when nothing was reported, or only
    "stopped" by ranks nobody asked to stop (torchrun ending the others after one died), or the
    rank that crashed was killed by a signal (gloo's "Connection reset by peer" on rank 0 is the
    consequence when rank 1 is SIGKILLed): a crash, named by rank and signal, with the log's last
    lines."""
    how = f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
    if stopped_by_user:
        if failure is None:
            return LaunchEnded(RunFailed(reason="stopped", message=f"{name!r} ended by stop ({how})"))
        return LaunchEnded(None)
    rank, death, cause = crashed_rank(list(events), returncode, log_text, first_gone)
    killed = cause and (failure is None or failure.rank != rank)
    if not (failure is None or failure.reason == "stopped" or killed):
        return LaunchEnded(None)
    msg = f"{name!r} exited with {how} without reporting a failure; last lines of worker.log:\n{log_tail}"
    head = "\n".join(x for x in (death, explain()) if x)
    crash = RunFailed(reason="crashed", message=f"{head}\n{msg}" if head else msg, rank=rank if rank is not None else 0)
    return LaunchEnded(crash, bool(killed))


def record_launch_end(failure: RunFailed | None, ended: LaunchEnded) -> RunFailed | None:
    """The run's failure once a launch's non-zero exit is recorded (``launch_failed``): a crash
    that caused what the ranks reported replaces it (a store error apart: the crash is then its
    consequence); otherwise as any reported failure (``run_failure``)."""
    if ended.event is None:
        return failure
    if ended.cause and (failure is None or failure.reason != "store_error"):
        return ended.event
    return run_failure(failure, ended.event)


def run_failure(current: RunFailed | None, event: RunFailed) -> RunFailed | None:
    """The run's failure once ``event`` is reported, ``current`` being the one so far: a store
    error is the cause of whatever the ranks report after it; a save on a full disk
    (``disk_full``) comes before what its peers then report (at the barrier, or in its folder);
    otherwise the first failure stands, except that a "stopped" nobody asked for gives way to
    the failure that caused it."""
    if event.reason == "store_error":
        return event
    if event.reason == "disk_full" and (current is None or current.reason != "store_error"):
        return event
    if current is None or (current.reason == "stopped" and event.reason != "stopped"):
        return event
    return current


def job_exit_code(event: Event | None) -> int | None:
    """The exit code a worker of its own would return for the job ``event`` ends (RunFinished /
    RunFailed of rank 0: ``accelctl.worker.main``'s codes); None for any other event."""
    if isinstance(event, (RunFinished, RunFailed)) and event.rank == 0:
        return 0 if isinstance(event, RunFinished) else JOB_EXIT_CODES.get(event.reason, 1)
    return None


def launch_exit(polled: int | None, job_code: int | None, stopping: bool) -> int | None:
    """A launch's exit code as the run sees it: its process's (``polled``, None while it runs),
    except that a shared worker whose job is over (``job_code``) ends its run then, whatever the
    process does next (its next job) -- during a stop, once the process has ended."""
    if job_code is not None and (polled is not None or not stopping):
        return job_code
    return polled


def only_teardown_left(processes: int, finished_ranks: Collection[int], ranks_gone: Callable[[set[int]], bool],
                       *, sole_survivor: bool, plain: bool) -> bool:
    """A launcher of ``processes`` ranks still runs while each of them reported ``RunFinished``
    and was seen gone (``ranks_gone``): what is left is its own teardown, not the run.  Only for
    the run's last launch, the only one left (``sole_survivor``), and a ``plain`` run: its own
    process (not a shared worker's), not a ``wait`` pass, neither stopping nor failed."""
    if not (sole_survivor and plain) or processes < 2:
        return False
    ranks = set(range(processes))
    return ranks <= set(finished_ranks) and ranks_gone(ranks)


def first_start(started_unix_s: float, events: Sequence[Event], shared: bool) -> float:
    """When the run began: when it was supervised, or -- a shared worker may begin its job
    before -- the earliest event's time."""
    if not shared:
        return started_unix_s
    return min([started_unix_s, *(e.time_unix_s for e in events if getattr(e, "time_unix_s", None))])

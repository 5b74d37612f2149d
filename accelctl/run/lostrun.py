"""A run whose runner is gone for good (SIGKILL, a crash, a reboot): its status, found on read.

``runner.json`` names the run's supervisor (``<pid>:<start ticks>``), its machine and boot, and
its launches' process groups.  A run with no summary whose runner is gone, and none of whose
processes still run, is *lost*: ``gone`` says so.

Reading never waits and never writes (issue 22, #2; issue 28):

* ``finish`` computes the lost run's summary in memory from what the ranks wrote (bounded,
  typed reads: ``accelctl.run.storefiles``) -- status ``failed``, reason ``runner_lost``
  (``store_error`` when the runner noted that it ended on a full store), steady-state figures
  over the steps that completed; ``not_started`` when the run's job never began (a queued job of
  a shared worker whose runner was killed before it got there: nothing ran).  Any file that
  cannot be read makes the run unreadable, with its reason, and nothing is written.
  ``store.read_run`` shows that result and leaves the folder as it is (a store that may not be
  written, one being read by others, reads the same).
* ``keep`` is the explicit step that writes it (the rank lines the runner never merged
  appended to ``events.jsonl``, then ``summary.json``), taken by the folder's next owner under
  its claim: ``run --resume`` before it archives the attempt, ``runs gc`` for the lost runs it
  leaves.  ``record`` writes under a NON-blocking exclusive lock on ``runner.json``: a lock held
  by another means that one is keeping the same result.  A store that cannot be written is
  shown lost all the same.  Files are opened without following links, and only regular files
  are written.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelctl.contract import boundedfile
from accelctl.contract.boundedfile import Unreadable
from accelctl.contract.events import Event, RunFailed
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Plan
from accelctl.run import store, storefiles

_OPEN = os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


def gone(path: Path, info: Mapping[str, Any]) -> bool:
    """``info`` (a checked ``runner.json``) names a runner of this machine and boot that is gone,
    and no process of the run is left (its workers follow their runner within seconds).  A run
    recorded on another machine (a shared store) cannot be judged from here: not gone."""
    host = info.get("host") or {}
    here = store._host()
    if host.get("name") != here["name"]:
        return False
    if host.get("boot_id") != here["boot_id"]:
        return True  # the machine rebooted since: nothing of the run can be running
    from accelctl.contract import supervision  # here: threading; ``estimate`` only reads runs_root()
    from accelctl.run import proof

    if supervision.alive(str(info["runner"])):
        return False
    return not proof.marked(path)  # its processes by their own mark, never by a recorded group


def _late_lines(path: Path, merged: set[bytes]) -> list[tuple[bytes, Event | None]]:
    """The ranks' lines that never reached ``events.jsonl`` (checked; ``Unreadable`` when a
    rank file cannot be read)."""
    late = []
    for rank_file in sorted(p for p in path.iterdir() if storefiles.RANK_FILE.match(p.name)):
        raw = boundedfile.read_regular(rank_file, storefiles.EVENTS_CAP) or b""
        late += [(line, ev) for line, ev in storefiles.event_lines(raw.split(b"\n"), rank_file.name)
                 if line not in merged]
    return late


def finish(path: Path, info: Mapping[str, Any]) -> tuple[dict[str, Any], list[bytes], str]:
    """The lost run's summary, the rank lines to append to ``events.jsonl`` (the failure's last),
    and why the run is unreadable instead ("": it is not)."""
    from accelctl.run.summary import build_summary

    try:
        raw = boundedfile.read_regular(path / store.EVENTS_FILE, storefiles.EVENTS_CAP) or b""
        lines = [(line, ev) for line, ev in storefiles.event_lines(raw.split(b"\n"), store.EVENTS_FILE)]
        late = _late_lines(path, {line for line, _ in lines})
    except Unreadable as exc:
        return {}, [], exc.reason
    except OSError as exc:
        return {}, [], f"run folder: {exc.strerror or exc}"
    plan_data, why = storefiles.read_object(path / store.PLAN_FILE)
    job_data, why_job = storefiles.read_object(path / store.JOB_FILE)
    why = why or why_job
    if why or not plan_data or not job_data:
        return {}, [], why or f"{store.PLAN_FILE if not plan_data else store.JOB_FILE} is missing"
    try:
        plan, job = Plan.from_dict(plan_data), WorkerJob.from_dict(job_data)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        return {}, [], f"plan.json or job.json of an unexpected shape ({type(exc).__name__}: {str(exc)[:80]})"
    events = [ev for _, ev in lines + late if ev is not None]
    pid = str(info["runner"]).partition(":")[0]
    steps = sum(1 for e in events if getattr(e, "kind", "") == "step" and getattr(e, "phase", "") == "measure"
                and getattr(e, "rank", 0) == 0)
    began = bool(events)
    if info.get("ended"):  # the runner ended, but could not write the summary
        failure = RunFailed(reason="store_error", message=str(info["ended"]))
    elif began:
        failure = RunFailed(reason="runner_lost", message=(
            f"the runner (pid {pid}) ended without finishing the run (killed?); "
            f"partial summary over the {steps} measured steps that completed"))
    else:
        failure = RunFailed(reason="runner_lost", message=(
            f"the runner (pid {pid}) ended before this run's job started (killed?); nothing ran"))
    try:
        started = float(info.get("started_unix_s") or path.stat().st_mtime)
    except OSError as exc:
        return {}, [], f"run folder: {exc.strerror or exc}"
    last = max([getattr(e, "time_unix_s", 0.0) for e in events] + [started])
    try:
        summary = build_summary(
            plan=plan, job=job, run_id=path.name, events=events, stop_kind=None, failure=failure,
            launches=[{"name": ln.name, "argv": None, "cwd": None, "pid": None, "returncode": None, "wall_s": None}
                      for ln in plan.launches],
            started_unix_s=started, finished_unix_s=last)
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as exc:
        return {}, [], f"its events cannot be summarised ({type(exc).__name__}: {str(exc)[:80]})"
    if not began and not info.get("ended"):
        summary["status"] = "not_started"
    return summary, [line for line, _ in late] + [failure.to_json().encode()], ""


def _open_regular(path: Path, flags: int, mode: int = 0o644) -> int | None:
    """A descriptor of ``path`` opened with ``flags``, only when it is a regular file (no link
    followed, no FIFO waited on); None otherwise."""
    try:
        fd = os.open(path, flags | _OPEN, mode)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def record(path: Path, summary: Mapping[str, Any], lines: list[bytes]) -> bool:
    """Keep a lost run's result in its folder, unless another reader holds the lock (it is
    keeping the same one) or has kept it already; True when this call wrote it."""
    lock = _open_regular(path / store.RUNNER_FILE, os.O_RDONLY)
    if lock is None:
        return False
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # someone else is finishing it
        if boundedfile.problem(path / store.SUMMARY_FILE) != "":
            return False  # kept already (or a summary.json that is not ours to replace)
        out = _open_regular(path / store.EVENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        if out is None:
            return False
        try:
            os.write(out, b"".join(line + b"\n" for line in lines))
        finally:
            os.close(out)
        store.write_summary(path, summary)
        return True
    except OSError:
        return False  # a store we may not write: shown as lost all the same
    finally:
        os.close(lock)


def keep(path: Path) -> bool:
    """Write the result of ``path``'s run into its folder if it is a lost run (readable, no
    ``summary.json``, its runner gone); True when this call wrote it.  The caller owns the
    folder (``ownership.claim``): ``run --resume``, ``runs gc``."""
    summary, _, _, _, why, lines = store.read_files(path)  # the folder read once, as a reader reads it
    if why or not summary or lines is None:
        return False
    return record(path, summary, lines)  # summary.json checked again, under the lock

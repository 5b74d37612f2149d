"""The feed: a thread worker that turns a run into messages for the run screen.

A *source* is a stored run folder (``ReplaySource``: its ``events.jsonl`` at full speed,
or paced by the recorded timestamps, or followed while another process still writes it),
a run its own supervisor writes (``SupervisedSource``: ``accelctl run FILE`` and ``r`` in
``accelctl tui``), or a ``RunHandle`` of this process (``LiveSource``: ``run_live`` only).  ``pump`` runs in a
Textual thread worker: it reads the source in short slices (so a cancelled worker ends
within ~0.1 s), posts ``RunEvents`` batches — everything that arrived since the last
read, in order — and finally ``RunEnded`` with the run's status and summary.

Nothing here touches the run itself: the runner keeps writing ``events.jsonl`` whatever
happens to the TUI, and a stop goes through the source's ``stop()`` (its supervisor's SIGTERM,
or ``RunHandle.stop()``).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelctl.contract.events import Event
from accelctl.run.store import EVENTS_FILE, PLAN_FILE, SUMMARY_FILE, file_problem, read_json, read_run
from accelctl.run.store.storefiles import check_event

#: events per message when replaying at full speed
CHUNK = 500
#: a paced replay never waits longer than this between two events (a long setup phase)
MAX_GAP_S = 1.0

_END = object()


class LiveSource:
    """A run in progress, read through ``handle.events()``.

    A daemon thread drains the handle's blocking generator into a queue, so the feed
    worker can wait with a timeout (and end promptly when cancelled) and can batch
    whatever has arrived.
    """

    live = True

    def __init__(self, handle):
        self.handle = handle
        self.run_dir: Path = Path(handle.run_dir)
        job = handle.job
        self.total_steps = job.measure.warmup + job.measure.steps * job.measure.repeat
        self.task = job.task.kind
        self.world_size = sum(ln.processes for ln in handle.plan.launches) or 1
        #: (workload, target, backend) from the plan, shown before the worker reports
        self.names = (handle.plan.workload, handle.plan.target, handle.plan.backend)
        #: the wall clock the run's elapsed time counts from (the source is made at launch)
        self.started_wall = time.time()
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def _drain(self) -> None:
        try:
            for ev in self.handle.events():
                self._q.put(ev)
        finally:
            self._q.put(_END)

    def read(self, timeout: float) -> tuple[list[Event], bool]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._drain, name="accelctl-tui-live", daemon=True)
            self._thread.start()
        try:
            item = self._q.get(timeout=timeout)
        except queue.Empty:
            return [], False
        batch: list[Event] = []
        while True:
            if item is _END:
                return batch, True
            batch.append(item)
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return batch, False

    def result(self) -> tuple[str, dict[str, Any] | None]:
        res = self.handle.wait()
        return res.status, res.summary

    def stop(self) -> None:
        self.handle.stop()

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def done(self) -> bool:
        return self.handle.done

    def status(self) -> str:
        return self.handle.wait().status


def stored(run_dir: Path) -> tuple[str, dict[str, Any] | None]:
    """(status, summary) of a run folder as the store reads it (``store.read_run``: what ``runs``,
    ``status`` and ``report`` say, an unreadable events file included); summary None when none
    can be read."""
    record = read_run(run_dir)
    if record.unreadable or not record.summary:
        return record.status, None  # "incomplete", a lost run's reason, or why it cannot be read
    return str(record.summary.get("status", "incomplete")), record.summary


class ReplaySource:
    """A stored run: ``events.jsonl`` replayed, then ``summary.json``.

    ``speed``: None replays at full speed (``CHUNK`` events per message); a number paces
    the replay by the recorded timestamps, ``speed`` times faster than real time.
    ``follow``: while ``summary.json`` is absent (the run is still going in another
    process), keep reading lines as they are appended.
    """

    live = False

    def __init__(self, run_dir: str | Path, *, speed: float | None = None, follow: bool | None = None):
        self.run_dir = Path(run_dir)
        self.speed = speed
        self.follow = (not self._summary_there()) if follow is None else follow
        plan = read_json(self.run_dir / PLAN_FILE)
        job = plan.get("job") or {}
        try:  # a plan.json of another shape (hand-edited): the replay goes on without these
            m = job.get("measure") or read_json(self.run_dir / SUMMARY_FILE).get("measure") or {}
            self.total_steps = int(m.get("warmup", 0) + m.get("steps", 0) * m.get("repeat", 1)) or None
            self.task = str((job.get("task") or {}).get("kind", ""))
            self.world_size = sum(int(ln.get("processes", 1)) for ln in plan.get("launches") or ()) or 1
        except (AttributeError, TypeError, ValueError, OverflowError):
            self.total_steps, self.task, self.world_size = None, "", 1
        self.names = tuple(str(plan.get(k) or "") for k in ("workload", "target", "backend"))
        self._fh = None
        self._partial = ""
        self._pending: list[Event] = []
        self._last_t: float | None = None
        self._due = 0.0

    def _lines(self) -> list[Event]:
        """Every complete line appended since the last call, parsed (torn lines skipped)."""
        if self._fh is None:
            if file_problem(self.run_dir / EVENTS_FILE) is not None:  # missing, or a FIFO that would block
                return []
            try:
                # no link followed, no FIFO waited on: swapped in since the look, it reads as empty
                fd = os.open(self.run_dir / EVENTS_FILE, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
                self._fh = os.fdopen(fd, encoding="utf-8", errors="replace")
            except OSError:
                return []
        data = self._partial + self._fh.read()
        lines = data.split("\n")
        self._partial = lines.pop()  # "" after a final newline; a torn line waits for the rest
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:  # only events of their shape (``storefiles.check_event``): a hand-edited line is skipped
                event = check_event(json.loads(line))
            except (ValueError, TypeError, RecursionError):
                continue
            if event is not None:
                out.append(event)
        return out

    def _summary_there(self) -> bool:
        """A summary.json is there, readable or not (a broken one ends the replay too)."""
        return file_problem(self.run_dir / SUMMARY_FILE) != ""

    def _finished(self) -> bool:
        return not self.follow or self._summary_there()

    def read(self, timeout: float) -> tuple[list[Event], bool]:
        if not self._pending:
            done = self._finished()  # looked at before reading: nothing is lost in between
            self._pending = self._lines()
            if not self._pending:
                if done:
                    if self._partial.strip():  # a last line without its newline
                        self._partial += "\n"
                        self._pending = self._lines()
                        if self._pending:
                            return self.read(timeout)
                    return [], True
                time.sleep(timeout)
                return [], False
        if self.speed is None:
            batch, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
            return batch, False
        # paced: one event at a time, at its recorded distance from the previous one
        ev = self._pending[0]
        t = getattr(ev, "time_unix_s", None)
        now = time.monotonic()
        if self._last_t is not None and t is not None and self._due == 0.0:
            self._due = now + min(MAX_GAP_S, max(0.0, t - self._last_t) / self.speed)
        if self._due and now < self._due:
            time.sleep(min(timeout, self._due - now))
            return [], False
        self._pending.pop(0)
        self._due = 0.0
        if t is not None:
            self._last_t = t
        return [ev], False

    def result(self) -> tuple[str, dict[str, Any] | None]:
        """The run's status and summary as the store reads the folder (``store.read_run``: what
        ``runs``, ``status`` and ``report`` say, an unreadable events file included)."""
        if self._fh is not None:
            self._fh.close()
        return stored(self.run_dir)

    def stop(self) -> None:  # a recording cannot be stopped
        pass


def pump(source, post: Callable[[Any], Any], feed_id: int, cancelled: Callable[[], bool], slice_s: float = 0.1) -> None:
    """Read ``source`` until it ends (or ``cancelled()``), posting messages with ``post``."""
    from accelctl.tui.messages import FeedFailed, RunEnded, RunEvents

    try:
        while not cancelled():
            events, ended = source.read(slice_s)
            if events:
                post(RunEvents(feed_id, events))
            if ended:
                status, summary = source.result()
                post(RunEnded(feed_id, status, summary, source.run_dir))
                return
    except Exception as exc:  # noqa: BLE001 - report it on screen; a live run goes on regardless
        post(FeedFailed(feed_id, f"{type(exc).__name__}: {exc}"))


class SupervisedSource(ReplaySource):
    """A run that its own supervisor process writes (``accelctl run FILE`` on a terminal:
    ``accelctl.tui.supervised``), followed from its folder as it is written; ``stop`` asks that
    supervisor to stop the run, as ``accelctl cancel`` does."""

    live = True

    def __init__(self, run_dir: str | Path, supervisor):
        super().__init__(run_dir, follow=True)
        self.supervisor = supervisor
        #: the wall clock the run's elapsed time counts from (its folder just appeared)
        self.started_wall = time.time()

    def _finished(self) -> bool:  # a supervisor killed before its summary: the run ends incomplete
        return self._summary_there() or self.supervisor.ended()

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def done(self) -> bool:
        return self._finished()

    def status(self) -> str:
        return stored(self.run_dir)[0]

    def stop(self) -> None:
        self.supervisor.stop()

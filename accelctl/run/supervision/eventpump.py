"""The event pump of a run: the ranks' files -> ``events.jsonl`` -> the sinks.

Every supervisor tick ``drain`` reads the complete lines the workers appended to
``rank<N>.jsonl``, writes each to ``events.jsonl`` (flushed per line), keeps the typed event
(``stream``) and hands it to every sink, tracking the run's failure so far, which ranks finished
and a shared worker's job end.  A run folder that cannot be written, or was removed or replaced
(``check_folder``), is a store error: recorded once as ``RunFailed(reason="store_error")``,
nothing more is written, ``on_store_error`` is called; events still reach the sinks.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from accelctl.contract.events import Event, RunFailed, RunFinished
from accelctl.private_files import store_opener
from accelctl.run import store
from accelctl.run.store.outcome import job_exit_code, run_failure
from accelctl.run.supervision.sinks import FanOut
from accelctl.run.tail import RankFiles, parse_line

log = logging.getLogger("accelctl.run")


def _unlinked(fh) -> bool:
    """The open file was removed from its folder (``rm -rf`` of a folder that a writer kept
    from going away entirely)."""
    try:
        return os.fstat(fh.fileno()).st_nlink == 0
    except (OSError, ValueError):  # closed: a store error already ends the run
        return False


def _folder_id(path: Path) -> tuple[int, int] | None:
    """The folder's (device, inode); None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class EventPump:
    """One run's events, from the ranks' files to ``events.jsonl`` and the sinks."""

    def __init__(self, run_dir: Path, sinks: Iterable[Any], on_store_error: Callable[[], None],
                 shared: bool = False) -> None:
        self.run_dir = run_dir
        self.sinks = FanOut(sinks)
        #: every event of the run so far, in the order read
        self.events: list[Event] = []
        #: the run's failure so far (``outcome.run_failure``)
        self.failure: RunFailed | None = None
        #: when a rank first reported a failure other than "stopped" (monotonic)
        self.failed_at: float | None = None
        #: the ranks that reported ``RunFinished``
        self.finished_ranks: set[int] = set()
        #: the first failure to write the run folder: nothing more is written
        self.store_error: str | None = None
        #: a shared worker's job ended (RunFinished / RunFailed of rank 0): the exit code a
        #: worker of its own would have returned for it; None: not yet, or not a shared worker
        self.job_code: int | None = None
        #: guards ``events``; notified on each new event and when the run ends
        self.cond = threading.Condition()
        self._shared = shared
        self._on_store_error = on_store_error
        self._files = RankFiles(run_dir)
        self._out = open(run_dir / store.EVENTS_FILE, "a", encoding="utf-8", opener=store_opener)  # noqa: SIM115
        #: the run folder as it was when the run started (device, inode)
        self._folder_id = _folder_id(run_dir)

    def stream(self, ended: Callable[[], bool]) -> Iterator[Event]:
        """Every event from the first, blocking for new ones until ``ended()``."""
        i = 0
        while True:
            with self.cond:
                while i >= len(self.events) and not ended():
                    self.cond.wait(0.1)
                batch = self.events[i:]
                if not batch and ended():
                    return
            i += len(batch)
            yield from batch

    def drain(self, final: bool = False) -> None:
        """Read what the ranks appended (with ``final``, also a last line without its newline)."""
        for raw in self._files.lines(final):
            text, event = parse_line(raw)
            if self._shared and self.job_code is None:
                self.job_code = job_exit_code(event)
            if text:
                self.emit(event, text)
            elif raw.strip():  # (a full disk tears lines as a matter of course)
                (log.debug if self.store_error else log.warning)("skipped a torn event line in %s: %.80r",
                                                                  self.run_dir, raw)

    def emit(self, event: Event | None, line: str | None = None) -> None:
        """One event: to ``events.jsonl`` (``line``: as the rank wrote it), the run's record, the sinks."""
        if self.store_error is None:
            try:
                self._out.write((line if line is not None else event.to_json()) + "\n")  # type: ignore[union-attr]
                self._out.flush()
            except (OSError, ValueError) as exc:  # ENOSPC, EACCES, EIO...; ValueError: closed
                self.store_failed(exc, store.EVENTS_FILE)
                if isinstance(event, RunFailed) and event.reason == "crashed":
                    return  # a rank that ended on the same full disk: the store error says why
        if event is None:
            return
        if isinstance(event, RunFailed):
            self.failure = run_failure(self.failure, event)
            if event.reason != "stopped" and self.failed_at is None:
                self.failed_at = time.monotonic()
        if isinstance(event, RunFinished) and isinstance(event.rank, int):
            self.finished_ranks.add(event.rank)
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()
        self.sinks.on_event(event)

    def check_folder(self) -> None:
        """A run folder removed (or replaced by another) while the run runs ends the run at once,
        ``failed`` (``store_error``) naming the folder: nothing of the run is written again, and no
        later write (a checkpoint save) recreates it."""
        if self.store_error is None and self._folder_id is not None and (
                _folder_id(self.run_dir) != self._folder_id or _unlinked(self._out)):
            self.store_failed(None, "", f"run store: the run folder {self.run_dir} was removed while the run ran")

    def store_failed(self, exc: BaseException | None, name: str, message: str | None = None) -> None:
        """The run folder cannot be written (a full disk, lost permissions): record it once as
        the run's failure and stop the run (``on_store_error``) -- never a supervisor that dies
        silently and a ``wait()`` that never returns."""
        if self.store_error is not None:
            return
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self.store_error = message or f"run store: {why} writing {name}"
        log.debug("%s (%s); stopping the run", self.store_error, self.run_dir)
        self.close_out(quiet=True)
        self.emit(RunFailed(reason="store_error", message=self.store_error))
        self._on_store_error()

    def close_files(self) -> None:
        """Stop following the ranks' files."""
        self._files.close()

    def close_out(self, quiet: bool = False) -> None:
        """Close ``events.jsonl``: its last buffered line may meet a full disk too (a store
        error; with ``quiet``, lost with the space it needed)."""
        try:
            self._out.close()
        except (OSError, ValueError) as exc:
            if not quiet:
                self.store_failed(exc, store.EVENTS_FILE)

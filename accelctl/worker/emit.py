"""Where a worker's events go: one JSON line per event, flushed as it is written.

Each rank appends to ``<events_dir>/rank<N>.jsonl`` so ranks never interleave
within a file; the runner tails those files.  With no ``events_dir`` (a worker
started by hand) the lines go to stdout.  No torch here: this module is cheap.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

from accelctl.contract.events import Event, LogMessage


class EventWriter:
    """Appends events of one rank as JSON lines; flushes after every line."""

    def __init__(self, events_dir: str, rank: int = 0) -> None:
        self.rank = rank
        self.path: Path | None = None
        self._fh: IO[str]
        if events_dir:
            self.path = Path(events_dir) / f"rank{rank}.jsonl"
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
        else:
            self._fh = sys.stdout
        #: the first write that failed (a full disk): later events are dropped, not raised again
        self.broken: OSError | None = None

    def emit(self, event: Event) -> None:
        """Write one event.  The first failed write raises (the worker ends, exit 1); after it,
        events are dropped: the runner, writing to the same store, reports the disk."""
        if self.broken is not None:
            return
        try:
            self._fh.write(event.to_json() + "\n")
            # flushed per line (no fsync): the runner reads while we write, and a
            # killed worker loses at most the line being written
            self._fh.flush()
        except OSError as exc:
            self.broken = exc
            raise

    __call__ = emit

    def log(self, level: str, message: str) -> None:
        """Shorthand for a ``LogMessage`` of this rank."""
        self.emit(LogMessage(level=level, message=message, rank=self.rank))

    def close(self) -> None:
        if self.path is not None and not self._fh.closed:
            try:
                self._fh.close()
            except OSError:  # the line still buffered meets the same full disk
                pass

    def __enter__(self) -> "EventWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Messages that travel up: from the feed thread to the run screen, and from screens to the app.

The feed thread (``accelctl.tui.feed``) posts ``RunEvents`` and finally ``RunEnded``; the
run screen folds them into its ``RunModel`` and hands the model down to its panels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.message import Message


class RunEvents(Message):
    """A batch of typed run events, in arrival order."""

    def __init__(self, feed_id: int, events: list[Any]) -> None:
        super().__init__()
        self.feed_id = feed_id
        self.events = events


class RunEnded(Message):
    """The run (or its recording) is over: ``status`` ok / failed / stopped / incomplete."""

    def __init__(self, feed_id: int, status: str, summary: dict[str, Any] | None, run_dir: Path | None) -> None:
        super().__init__()
        self.feed_id = feed_id
        self.status = status
        self.summary = summary
        self.run_dir = run_dir


class FeedFailed(Message):
    """The feed itself broke (an unreadable file...); the run, if live, goes on."""

    def __init__(self, feed_id: int, error: str) -> None:
        super().__init__()
        self.feed_id = feed_id
        self.error = error


class SelectionChanged(Message):
    """A workload file / workload / target was chosen (Workloads screen -> app)."""

    def __init__(self, path: Path | None, workload: str | None, target: str | None) -> None:
        super().__init__()
        self.path = path
        self.workload = workload
        self.target = target


class OpenRun(Message):
    """Open a stored run (Runs screen -> app): replayed from its events.jsonl."""

    def __init__(self, path: Path, paced: bool = False) -> None:
        super().__init__()
        self.path = path
        self.paced = paced

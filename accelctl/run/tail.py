"""Following the workers' ``rank<N>.jsonl`` files while they grow.

Each rank appends one JSON object per line.  A reader may catch a line half written:
``JsonlTail`` keeps the bytes after the last newline until the rest arrives (bytes,
not text, so a multi-byte character split across two reads stays whole).  It reads in
chunks and hands a line longer than ``MAX_LINE`` out in pieces of that size (a progress bar
that rewrites itself with ``\r`` writes no newline for hours): memory stays bounded.
"""

from __future__ import annotations

import json
from pathlib import Path

from accelctl.contract.events import Event, event_from_dict

#: the longest line handed out whole; longer ones come in pieces of this size
MAX_LINE = 1 << 20
_CHUNK = 1 << 20


class JsonlTail:
    """Follows one growing JSONL file; hands out complete lines only."""

    def __init__(self, path: Path):
        self.path = path
        self.fh = open(path, "rb")  # noqa: SIM115 - closed in close()
        self.buf = b""

    def lines(self, final: bool = False) -> list[bytes]:
        """New complete lines; with ``final`` also a last line that lacks its newline."""
        return list(self.each_line(final))

    def each_line(self, final: bool = False):
        """``lines``, one at a time as the file is read (a chunk at a time)."""
        while chunk := self.fh.read(_CHUNK):
            *done, self.buf = (self.buf + chunk).split(b"\n")
            yield from done
            while len(self.buf) > MAX_LINE:
                piece, self.buf = self.buf[:MAX_LINE], self.buf[MAX_LINE:]
                yield piece
        if final and self.buf.strip():
            yield self.buf
            self.buf = b""

    def close(self) -> None:
        self.fh.close()


class RankFiles:
    """All ``rank*.jsonl`` files of an events folder, including ones that appear later."""

    def __init__(self, events_dir: Path, pattern: str = "rank*.jsonl"):
        self.events_dir = events_dir
        self.pattern = pattern
        self.tails: dict[Path, JsonlTail] = {}

    def lines(self, final: bool = False) -> list[bytes]:
        out: list[bytes] = []
        for path in sorted(self.events_dir.glob(self.pattern)):
            if path not in self.tails:
                self.tails[path] = JsonlTail(path)
            out.extend(self.tails[path].lines(final))
        return out

    def close(self) -> None:
        for tail in self.tails.values():
            tail.close()


def parse_line(raw: bytes) -> tuple[str, Event | None]:
    """``(text, event)`` for one line.

    ``text`` is ``""`` for a blank or torn (not JSON) line, which is dropped; ``event``
    is ``None`` for a JSON object of an unknown kind, which is kept in ``events.jsonl``
    but given to no sink.
    """
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return "", None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return "", None
    if not isinstance(data, dict):
        return "", None
    try:
        return text, event_from_dict(data)
    except (ValueError, TypeError):
        return text, None

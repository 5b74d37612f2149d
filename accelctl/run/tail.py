"""Following the workers' ``rank<N>.jsonl`` files while they grow.

Each rank appends one JSON object per line.  A reader may catch a line half written:
``JsonlTail`` keeps the bytes after the last newline until the rest arrives (bytes,
not text, so a multi-byte character split across two reads stays whole).
"""

from __future__ import annotations

import json
from pathlib import Path

from accelctl.contract.events import Event, event_from_dict


class JsonlTail:
    """Follows one growing JSONL file; hands out complete lines only."""

    def __init__(self, path: Path):
        self.path = path
        self.fh = open(path, "rb")  # noqa: SIM115 - closed in close()
        self.buf = b""

    def lines(self, final: bool = False) -> list[bytes]:
        """New complete lines; with ``final`` also a last line that lacks its newline."""
        self.buf += self.fh.read()
        *done, self.buf = self.buf.split(b"\n")
        if final and self.buf.strip():
            done.append(self.buf)
            self.buf = b""
        return done

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

"""When a stored run started, and the ``--since WHEN`` / ``--older-than AGE`` values it is
compared with: shared by ``runs`` (its filter, ``accelctl.cli.runs``) and ``runs gc``
(``accelctl.cli.detach``), so that neither verb module imports the other.  Standard library only."""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since(text: str, now: float | None = None) -> float:
    """``--since WHEN`` as unix seconds: an age before ``now`` or an ISO date/time (UTC
    unless it names a zone)."""
    from datetime import datetime, timezone

    if m := _AGO.match(text):
        return (time.time() if now is None else now) - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither an age (90m, 12h, 2d, 1w) nor an ISO date "
                                         "(2026-01-31, 2026-01-31T08:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def started_unix_s(run: Any) -> float | None:
    """When a listed run started (its summary, else its ISO ``started``); None if unknown."""
    from datetime import datetime, timezone

    value = (getattr(run, "summary", None) or {}).get("started_unix_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    started = getattr(run, "started", "") or ""
    try:
        when = datetime.fromisoformat(started.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()

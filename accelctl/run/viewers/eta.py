"""The time a run has left, for the console's progress lines: the steps left times the
median step time so far (robust to a slow first, compiling step), as ``eta 1:23``."""

from __future__ import annotations

from typing import Sequence


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def duration(seconds: float) -> str:
    """``4.2 s`` under ten seconds, ``m:ss`` under an hour, else ``h:mm:ss``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def eta(step_times: Sequence[float], steps_left: int) -> str | None:
    """``eta DURATION`` for ``steps_left`` more steps; None when nothing is left or no step
    time is known yet."""
    if steps_left <= 0 or not step_times:
        return None
    return f"eta {duration(steps_left * median(step_times))}"

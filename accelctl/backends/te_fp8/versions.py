"""Transformer Engine version strings as comparable tuples, for the planner (which autocast API a
release has) and the check (the plan's release against the installed source's).  Kept apart from
both so that the check depends on it without depending on the planner.
"""

from __future__ import annotations


def version_tuple(version: str) -> tuple[int, ...]:
    """``"2.20.2"`` -> ``(2, 20, 2)``; pre-release suffixes are ignored."""
    out = []
    for part in str(version).split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)

"""Number formatting shared by the panels (plain functions, no Textual)."""

from __future__ import annotations

import math


def ms(seconds: float | None, digits: int = 1) -> str:
    """Seconds as milliseconds (``12.3 ms``), or seconds above ten seconds."""
    if seconds is None:
        return "-"
    if seconds >= 10:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.{digits}f} ms"


def num(x: float | None) -> str:
    """A rate or count, compact: ``1,234`` / ``56.7`` / ``0.123``."""
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def nbytes(n: int | float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def duration(seconds: float | None) -> str:
    """``0:01:05``-style duration (``-`` when unknown)."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def money(usd: float | None) -> str:
    if usd is None:
        return "-"
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}"


def ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}×"


def path(p) -> str:
    """A path relative to the working folder when it lies inside it."""
    from pathlib import Path

    p = Path(p)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(p)

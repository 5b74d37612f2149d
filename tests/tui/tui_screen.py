"""Helpers for the TUI tests: the screen as plain text, waiting for a condition."""

from __future__ import annotations

import asyncio
import io
import time

from rich.console import Console


def screen_text(app) -> str:
    """What the terminal shows now, as plain text (one line per row)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system=None,
                      record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def wait_for(pilot, condition, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)
    await pilot.pause()
    await asyncio.sleep(0)

"""issue 27: at 80 columns the workloads view cut every diagnostic off right of its caret (E407
and E401 were invisible); each message and hint now wraps on lines of its own under the gutter,
whole, while source lines end in '…' at the panel's edge."""

from __future__ import annotations

import pytest
from tui_fixtures import WORKLOADS
from tui_screen import screen_text, wait_for

from accelctl.tui.app import AccelctlApp
from accelctl.tui.workspace import scan


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 40), (160, 48)])
async def test_every_diagnostic_message_is_shown_whole(runs_dir, size):
    wf = next(w for w in scan(WORKLOADS) if w.path.name == "broken.wl")
    app = AccelctlApp(WORKLOADS, runs_root=runs_dir)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: "broken.wl" in screen_text(app), what="the files")
        await pilot.press("up")  # broken.wl, as the snapshot test selects it
        await wait_for(pilot, lambda: "error[" in screen_text(app), what="the diagnostics")
        shown = " ".join(" ".join(line.replace("│", " ").split()) for line in screen_text(app).splitlines())
    for d in wf.diags:
        words = " ".join(f"{d.severity}[{d.code}]: {d.message}".split())
        assert words in shown, (d.code, words)

"""NO_COLOR (https://no-color.org): set and not empty, no colour in any output on a
terminal: accelctl's own messages, rich tables, the TUI.  Without it the same commands do
colour (so the check can fail)."""

from __future__ import annotations

import pytest
from cli_pty import COLOUR_SGR, ROOT, in_pty

STORE = str(ROOT / "tests" / "report" / "fixtures" / "store")
COMMANDS = {
    "validate (diagnostics, summary)": ["validate", str(ROOT / "workloads" / "tiny_gpt2.wl")],
    "runs (rich table)": ["runs", "--runs-dir", STORE],
    "validate, an invalid file": ["validate", str(ROOT / "tests" / "report" / "fixtures" / "store")],
}


#: the commands that colour their output on a terminal without NO_COLOR
COLOURED = ("validate (diagnostics, summary)", "validate, an invalid file")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_color_set_means_no_colour(name):
    code, coloured = in_pty(COMMANDS[name])
    if name in COLOURED:
        assert COLOUR_SGR.search(coloured.decode()), f"{name}: no colour without NO_COLOR, the check proves nothing"
    code_nc, plain = in_pty(COMMANDS[name], env={"NO_COLOR": "1"})
    assert code_nc == code
    found = COLOUR_SGR.findall(plain.decode())
    assert not found, f"{name} coloured under NO_COLOR: {found[:5]}"


def test_an_empty_no_color_changes_nothing():
    """no-color.org: only a non-empty NO_COLOR turns colour off."""
    _, out = in_pty(COMMANDS["validate (diagnostics, summary)"], env={"NO_COLOR": ""})
    assert COLOUR_SGR.search(out.decode())


@pytest.mark.slow
def test_the_tui_draws_without_colour_under_no_color(tmp_path):
    pytest.importorskip("textual")
    code, out = in_pty(["tui", str(ROOT / "workloads" / "tiny_gpt2.wl"), "--runs-dir", str(tmp_path)],
                       env={"NO_COLOR": "1"}, keys=b"q", after=b"tiny_gpt2", timeout=90)
    assert b"tiny_gpt2" in out and code == 0
    found = COLOUR_SGR.findall(out.decode(errors="replace"))
    # Textual's monochrome filter: colours become greys, which still are colour codes; none
    # of the hues (anything but r == g == b) may be left
    hues = [c for c in found if not _grey(c)]
    assert not hues, hues[:5]


def _grey(sgr: str) -> bool:
    parts = sgr[2:-1].split(";")
    for i, p in enumerate(parts):
        if p in ("38", "48") and i + 1 < len(parts) and parts[i + 1] == "2":
            r, g, b = parts[i + 2:i + 5]
            if not (r == g == b):
                return False
    return True

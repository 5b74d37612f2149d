"""`accelctl validate` and `accelctl plan` never import Textual: a command builds only its own
verb's parser (``accelctl.cli.VERBS``), so the `tui` verb's module (``accelctl.cli.tui``, which
imports nothing heavy either) is not even loaded; the app loads only when ``accelctl tui`` (or a
live ``accelctl run``) starts it.  ``accelctl --help`` builds every verb: still no Textual.

Checked in a fresh interpreter through ``sys.modules`` (``-X importtime`` does not see
modules loaded with ``importlib.import_module``, which is how the verb is registered).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tui_fixtures import ROOT

WORKLOAD = "tests/tui/fixtures/workloads/tiny.wl"
HEAVY = ("textual", "textual_plotext", "plotext", "torch")
APP = ("accelctl.tui.app", "accelctl.tui.screens", "accelctl.tui.widgets", "accelctl.tui.feed",
       "accelctl.tui.messages")


def _modules_after(argv: list[str]) -> tuple[int, list[str]]:
    code = (
        "import json, sys, contextlib, io\n"
        "from accelctl.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        rc = main({argv!r})\n"
        "    except SystemExit as exc:  # --help\n"
        "        rc = exc.code\n"
        "print(json.dumps({'rc': rc, 'modules': sorted(sys.modules)}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["rc"], out["modules"]


@pytest.mark.parametrize("argv", [["validate", WORKLOAD], ["plan", WORKLOAD], ["plan", WORKLOAD, "-f", "json"]],
                         ids=["validate", "plan", "plan-json"])
def test_validate_and_plan_do_not_import_textual(argv):
    rc, modules = _modules_after(argv)
    assert rc == 0
    assert "accelctl.cli.tui" not in modules  # only the named verb's parser is built
    heavy = [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(APP)]
    assert not heavy, f"{argv[0]} imported {heavy}"


def test_the_tui_verb_registers_without_textual_and_the_whole_help_needs_no_verb_module():
    rc, modules = _modules_after(["tui", "--help"])
    assert rc == 0 and "accelctl.cli.tui" in modules
    heavy = [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(APP)]
    assert not heavy, f"tui --help imported {heavy}"
    rc, modules = _modules_after(["--help"])  # the verb list is the verb table's lines
    assert rc == 0 and "accelctl.cli.tui" not in modules and "accelctl.cli.run" not in modules


def test_tui_help_does_not_start_the_app():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", "tui", "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "a folder of .wl files" in proc.stdout

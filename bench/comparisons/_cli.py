"""Shared by the CLI-latency comparisons: a cold ``accelctl`` command (a fresh interpreter)
against the floor of ``python -c "import lark, rich"`` -- what any lark + rich CLI pays.

"Cold" is a fresh interpreter, as a user's shell starts one -- with bytecode, as an installed
package has it.  Both arms therefore run with bytecode caching on and its files under the
session's workdir (``PYTHONPYCACHEPREFIX``; ``PYTHONDONTWRITEBYTECODE`` dropped, which this
lab's environment sets), each run once untimed first to write them.  Without this, accelctl's
~100 modules were compiled from source on every run while lark and rich loaded the ``.pyc``
that pip wrote: a comparison of compilers, not of CLIs (it put plan at 2.9x the floor).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.harness import ROOT, Setup, base_env, run_timed

FLOOR = [sys.executable, "-c", "import lark, rich"]


def bytecode_env(workdir: Path) -> dict[str, str]:
    """``base_env`` with bytecode read and written under ``workdir/pycache`` (both arms)."""
    env = base_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def cli_setup(args: list[str], label: str, workdir: Path) -> Setup:
    env = bytecode_env(workdir)
    command = [sys.executable, "-m", "accelctl.cli", *args]
    for warm in (command, FLOOR):  # writes both arms' bytecode; not timed
        subprocess.run(warm, cwd=ROOT, env=env, capture_output=True, timeout=300, check=False)

    def a(core):
        return {"wall_s": run_timed(command, core, 300, env=env)[1]}

    def b(core):
        return {"wall_s": run_timed(FLOOR, core, 300, env=env)[1]}

    return Setup(a=a, b=b, a_label=label, b_label='python -c "import lark, rich"',
                 metrics={"wall_s": "cold process (with bytecode), start to exit"})

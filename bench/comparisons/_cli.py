"""Shared by the CLI-latency comparisons: a cold ``accelctl`` command (a fresh interpreter)
against the floor of ``python -c "import lark, rich"`` -- what any lark + rich CLI pays.

"Cold" is a fresh interpreter, as a user's shell starts one -- with bytecode, as an installed
package has it.  Both arms therefore run with bytecode caching on and its files under the
session's workdir (``PYTHONPYCACHEPREFIX``; ``PYTHONDONTWRITEBYTECODE`` dropped, which this
lab's environment sets), each run once untimed first to write them.  Without this, accelctl's
~100 modules were compiled from source on every run while lark and rich loaded the ``.pyc``
that pip wrote: a comparison of compilers, not of CLIs (it put plan at 2.9x the floor).

``count_instructions``: the arms count the instructions each cold run executes (valgrind's
callgrind, ``instructions``) instead of timing it.  A machine under load stretches wall times
unevenly and compresses their ratio; the count of one run is the same at any load (it varies
by ~0.1 % between runs), so it shows what a change cut where wall pairs cannot.
"""

from __future__ import annotations

import re
import shutil
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


def instructions(command: list[str], env: dict[str, str], workdir: Path) -> float:
    """The instructions one run of ``command`` executes, as callgrind counts them."""
    log = workdir / "callgrind.log"
    run_timed(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}", *command],
              None, 900, env=env)
    found = re.search(r"Collected : (\d+)", log.read_text())
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's log {log}")
    return float(found.group(1))


def no_valgrind() -> str | None:
    """Why the instruction-count comparisons cannot run here (None: they can)."""
    return None if shutil.which("valgrind") else "valgrind not installed"


def cli_setup(args: list[str], label: str, workdir: Path, count_instructions: bool = False) -> Setup:
    env = bytecode_env(workdir)
    command = [sys.executable, "-m", "accelctl.cli", *args]
    for warm in (command, FLOOR):  # writes both arms' bytecode; not timed
        subprocess.run(warm, cwd=ROOT, env=env, capture_output=True, timeout=300, check=False)

    def arm(cmd: list[str]):
        if count_instructions:
            return lambda core: {"instructions": instructions(cmd, env, workdir)}
        return lambda core: {"wall_s": run_timed(cmd, core, 300, env=env)[1]}

    metrics = ({"instructions": "instructions executed by a cold process (with bytecode), callgrind"}
               if count_instructions else {"wall_s": "cold process (with bytecode), start to exit"})
    return Setup(a=arm(command), b=arm(FLOOR), a_label=label, b_label='python -c "import lark, rich"',
                 metrics=metrics, pinnable=not count_instructions)

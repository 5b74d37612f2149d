"""Shared by the CLI-latency comparisons: a cold ``accelctl`` command (a fresh interpreter)
against the floor of ``python -c "import lark, rich"`` -- what any lark + rich CLI pays."""

from __future__ import annotations

import sys

from bench.harness import Setup, base_env, run_timed

FLOOR = [sys.executable, "-c", "import lark, rich"]


def cli_setup(args: list[str], label: str) -> Setup:
    def a(core):
        return {"wall_s": run_timed([sys.executable, "-m", "accelctl.cli", *args], core, 300, env=base_env())[1]}

    def b(core):
        return {"wall_s": run_timed(FLOOR, core, 300, env=base_env())[1]}

    return Setup(a=a, b=b, a_label=label, b_label='python -c "import lark, rich"',
                 metrics={"wall_s": "cold process, start to exit"})

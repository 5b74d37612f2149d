"""A preflight from the command line: run it and print its one-line verdict (``run --preflight``,
``doctor --plan``), apart from either verb so that neither imports the other."""

from __future__ import annotations

import sys

from accelctl.cli.common import color


def print_preflight(c, pre, reply=None) -> None:
    """A preflight's one-line verdict (and into ``reply``)."""
    world = c.world
    print(color(pre.message, "32" if pre.ok else "1;31", sys.stdout), flush=True)
    if reply is not None:
        reply.result.setdefault("preflights", []).append(
            {"workload": c.name, "target": c.plan.target, "engine": c.plan.engine, "world": world, "ok": pre.ok,
             "message": pre.message})


def preflight(c, req, reply=None) -> bool:
    """Run ``c``'s preflight and print its verdict (``doctor --plan``); passed?"""
    from accelctl.run.supervision.orchestrate import preflight_line, run_preflight

    print(f"accelctl: {preflight_line(c)}", flush=True)
    result = run_preflight(c, req)
    print_preflight(c, result, reply)
    return result.ok

"""The bare side of a comparison: a script of ``bench/baselines`` in a fresh process.

The script prints one JSON line (``{"step_times": [...]}``, warm-up excluded); the arm's
metrics are ``step_s`` (their median) and ``wall_s`` (the whole process, start to exit), and
where the script reports them ``params`` (its model's parameter count) and ``first_loss`` /
``final_loss`` (of its ``losses``, warm-up included), which the accelctl arm reports too.
A ``launcher`` (torchrun, ``accelerate launch``) goes in front of the script.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from bench.harness import BENCH, base_env, run_timed

BASELINES = BENCH / "baselines"


def run_baseline(script: str, args: list[str], core: int | None, launcher: list[str] | None = None,
                 env_extra: dict[str, str] | None = None, timeout: float = 1800.0,
                 repeat: int = 1) -> dict[str, float]:
    """Run ``script`` ``repeat`` times one after the other (K bare processes stand for a file of
    K workloads); ``step_s`` is the first process's median step."""
    cmd = [*(launcher or [sys.executable]), str(BASELINES / script), *args]
    env = base_env() | (env_extra or {})
    walls, first, result = [], None, {}
    for _ in range(repeat):
        _, wall, out = run_timed(cmd, core, timeout, env=env, cwd=BASELINES)
        walls.append(wall)
        line = next((x for x in reversed(out.strip().splitlines()) if x.startswith("{")), None)
        if line is None:
            raise RuntimeError(f"{script}: printed no result")
        if first is None:
            result = json.loads(line)
            first = result["step_times"]
    same_model = {"params": result.get("params")}
    if result.get("losses"):
        same_model.update(first_loss=result["losses"][0], final_loss=result["losses"][-1])
    return {"step_s": statistics.median(first), "wall_s": sum(walls),
            **{k: v for k, v in same_model.items() if v is not None}}


def script_path(name: str) -> Path:
    return BASELINES / name

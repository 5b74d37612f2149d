"""Shared by the bare baselines (not accelctl): timing a loop and printing its result.

``timed_steps(step, warmup, steps)`` calls ``step()`` warmup + steps times and returns the
measured steps' seconds (warm-up excluded), the way a user would time a loop by hand.
"""

from __future__ import annotations

import json
import sys
import time


def timed_steps(step, warmup: int, steps: int) -> list[float]:
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
    return times


def report(step_times: list[float], **extra) -> None:
    print(json.dumps({"step_times": step_times, **extra}), flush=True)
    sys.stdout.flush()

"""Is validation linear in the file's size?  Builds workload files of 0.25, 1 and 5 MB (the
shipped ``workloads/tiny_gpt2.wl`` repeated, each copy's workloads renamed) and times
``accelctl validate`` on each in a fresh process, wall clock and CPU, best of N.

    .venv/bin/python bench/validate_scaling.py                  # 0.25, 1, 5 MB, best of 3
    .venv/bin/python bench/validate_scaling.py --sizes 1 5 10 --rounds 5

Prints each size's seconds and seconds per MB, and the ratio of the largest to the
smallest per-MB figure (1.0 = linear; issue 11 measured 6.8 s for 1 MB and 33 s for 5 MB
before the recursive-descent parser and the paused garbage collector).  Wall clock on a
busy shared machine runs well above CPU time: read both.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def workload_file(megabytes: float, folder: Path) -> Path:
    src = (ROOT / "workloads" / "tiny_gpt2.wl").read_text(encoding="utf-8")
    parts, size, n = [], 0, 0
    while size < megabytes * 1e6:
        text = re.sub(r"workload (\w+)", lambda m: f"workload {m.group(1)}_{n}", src)
        parts.append(text)
        size += len(text)
        n += 1
    path = folder / f"big_{megabytes:g}mb.wl"
    path.write_text("".join(parts), encoding="utf-8")
    return path


def time_validate(path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``accelctl validate`` process, start-up included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "accelctl.cli", "validate", str(path)], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"validate failed on {path}:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[0.25, 1, 5], help="file sizes in MB")
    ap.add_argument("--rounds", type=int, default=3, help="runs per size (the best is kept)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="accelctl-bench-") as d:
        for mb in args.sizes:
            path = workload_file(mb, Path(d))
            runs = [time_validate(path) for _ in range(args.rounds)]
            wall, cpu = min(w for w, _ in runs), min(c for _, c in runs)
            rows.append((mb, wall, cpu))
            print(f"{mb:6g} MB  wall {wall:6.2f} s ({wall / mb:5.2f} s/MB)   CPU {cpu:6.2f} s ({cpu / mb:5.2f} s/MB)")
    (mb0, _, cpu0), (mb1, _, cpu1) = rows[0], rows[-1]
    print(f"CPU s/MB at {mb1:g} MB over {mb0:g} MB: {(cpu1 / mb1) / (cpu0 / mb0):.2f} (1.0 = linear; start-up "
          "weighs on the smallest)")


if __name__ == "__main__":
    main()

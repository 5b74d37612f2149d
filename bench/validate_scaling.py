"""Is validation linear in the file's size?  Builds workload files of 0.25, 1 and 5 MB (the
shipped ``workloads/tiny_gpt2.wl`` repeated, each copy's workloads renamed) and times
``accelctl validate`` on each in a fresh process, wall clock and CPU, best of N.

    .venv/bin/python bench/validate_scaling.py                  # 0.25, 1, 5 MB, best of 3
    .venv/bin/python bench/validate_scaling.py --sizes 1 5 10 --rounds 5

Prints each size's seconds and seconds per MB, and the ratio of the largest to the
smallest per-MB figure (1.0 = linear; issue 11 measured 6.8 s for 1 MB and 33 s for 5 MB
before the recursive-descent parser and the paused garbage collector).  Wall clock on a
busy shared machine runs well above CPU time: read both.  "in-process" is the CPU time of
``accelctl.api.validate`` alone (``time.process_time()`` around it in the child: no
interpreter start-up, no imports).  ``--callgrind`` also counts the instructions of one
``accelctl validate`` per size under ``valgrind --tool=callgrind`` (about 100 times slower;
steady however busy the machine is, so the figure to compare changes by).

Measured here (``--callgrind``'s counter; ``PYTHONDONTWRITEBYTECODE=1`` as on this
machine, so start-up compiles the modules each time):

    5 MB, the whole ``accelctl validate`` process     before 17.24 G    after 15.90 G (-7.8 %)
    0.25 MB, in-process phases, instructions        before    after
      tokenize (descent.tokenize)                     330 M     271 M   one regex, groups by number
      parse (recursive descent + AST)                 249 M     258 M   (unchanged; noise)
      check (spec.check, spec.values)                 317 M     299 M   fast paths for plain entries

"before" is 11ad722; start-up and imports are about 0.45 G of each process.  What is left
is spread thin: about 4,000 instructions per token in the regex engine (``_TOKEN``, once
per token), as many in Python building the five token lists and about 1.6 AST nodes and
spans per token, and about 0.7 M per workload in the check pass.  In-process CPU at 5 MB,
``time.process_time()`` around ``accelctl.api.validate``, best of 2 on the busy machine:
2.01 s (0.40 s/MB) before, 1.89 s (0.38 s/MB) after.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
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


_IN_PROCESS = ("import sys, time\n"
               "from accelctl.api import validate\n"
               "t = time.process_time()\n"
               "specs, diags = validate(sys.argv[1])\n"
               "print(time.process_time() - t)\n")


def in_process_cpu(path: Path) -> float:
    """CPU seconds of ``accelctl.api.validate(path)`` alone, in a fresh process."""
    r = subprocess.run([sys.executable, "-c", _IN_PROCESS, str(path)], cwd=ROOT, capture_output=True, text=True,
                       check=True)
    return float(r.stdout.split()[-1])


def instructions(path: Path) -> int | None:
    """Instructions of one ``accelctl validate`` process under callgrind (None without valgrind)."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="accelctl-callgrind-") as d:
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/out", sys.executable, "-m",
                            "accelctl.cli", "validate", str(path)], cwd=ROOT, capture_output=True, text=True,
                           check=False)
    m = re.search(r"refs:\s+([\d,]+)", r.stderr)
    return int(m.group(1).replace(",", "")) if m else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[0.25, 1, 5], help="file sizes in MB")
    ap.add_argument("--rounds", type=int, default=3, help="runs per size (the best is kept)")
    ap.add_argument("--callgrind", action="store_true", help="also count instructions under valgrind (slow)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="accelctl-bench-") as d:
        for mb in args.sizes:
            path = workload_file(mb, Path(d))
            runs = [time_validate(path) for _ in range(args.rounds)]
            wall, cpu = min(w for w, _ in runs), min(c for _, c in runs)
            rows.append((mb, wall, cpu))
            inside = min(in_process_cpu(path) for _ in range(args.rounds))
            print(f"{mb:6g} MB  wall {wall:6.2f} s ({wall / mb:5.2f} s/MB)   CPU {cpu:6.2f} s ({cpu / mb:5.2f} s/MB)   "
                  f"in-process CPU {inside:6.2f} s ({inside / mb:5.2f} s/MB)")
            if args.callgrind:
                ir = instructions(path)
                print(f"{'':9}callgrind: {ir / 1e9:.2f} G instructions ({ir / 1e9 / mb:.2f} G/MB)" if ir
                      else f"{'':9}callgrind: no valgrind here")
    (mb0, _, cpu0), (mb1, _, cpu1) = rows[0], rows[-1]
    print(f"CPU s/MB at {mb1:g} MB over {mb0:g} MB: {(cpu1 / mb1) / (cpu0 / mb0):.2f} (1.0 = linear; start-up "
          "weighs on the smallest)")


if __name__ == "__main__":
    main()

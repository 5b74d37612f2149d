"""Where a whole-suite run's time went, from ``ACCELCTL_TEST_TIMELINE=DIR`` (tests/conftest.py):
per worker its busy time, its idle gaps and its last test; the longest tests; each test file's
total.

    ACCELCTL_TEST_TIMELINE=/tmp/tl python -m pytest -n 2 --dist loadgroup
    python scripts/timeline.py /tmp/tl [--top 40]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path


def read(folder: Path) -> list[tuple[str, float, float, float, str]]:
    rows = []
    for tsv in sorted(folder.glob("*.tsv")):
        for line in tsv.read_text(encoding="utf-8").splitlines():
            worker, start, end, load, nodeid = line.split("\t", 4)
            rows.append((worker, float(start), float(end), float(load), nodeid))
    return sorted(rows, key=lambda r: r[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    rows = read(args.folder)
    if not rows:
        raise SystemExit(f"no timeline in {args.folder}")
    t0, t1 = rows[0][1], max(r[2] for r in rows)
    print(f"{len(rows)} tests, {t1 - t0:.0f} s from the first start to the last end")
    for worker in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == worker]
        busy = sum(r[2] - r[1] for r in mine)
        gaps = [(b[1] - a[2], a[4]) for a, b in zip(mine, mine[1:]) if b[1] - a[2] > 2]
        print(f"{worker}: {len(mine)} tests, busy {busy:.0f} s, ends at +{mine[-1][2] - t0:.0f} s "
              f"(last: {mine[-1][4]}), gaps > 2 s: {sum(g for g, _ in gaps):.0f} s in {len(gaps)}")
        for gap, after in sorted(gaps, reverse=True)[:5]:
            print(f"    {gap:6.1f} s after {after}")
    print(f"\nlongest {args.top} tests (s, load at end, worker, starts at +s):")
    for w, s, e, load, nodeid in sorted(rows, key=lambda r: r[1] - r[2])[:args.top]:
        print(f"  {e - s:7.1f}  {load:5.1f}  {w}  +{s - t0:5.0f}  {nodeid}")
    files: dict[str, float] = defaultdict(float)
    for w, s, e, load, nodeid in rows:
        files[nodeid.split("::")[0]] += e - s
    print(f"\nlongest {args.top} files (s):")
    for name, total in sorted(files.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {total:7.1f}  {name}")


if __name__ == "__main__":
    main()

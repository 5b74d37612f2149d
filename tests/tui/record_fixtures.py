"""Re-record the TUI test fixtures: real short CPU runs of ``fixtures/workloads/tiny.wl``.

    .venv/bin/python tests/tui/record_fixtures.py            # run the four workloads, copy them
    .venv/bin/python tests/tui/record_fixtures.py --from DIR # copy runs already recorded in DIR

Each run folder keeps only what the TUI reads (events.jsonl, summary.json, spec.json,
plan.json, worker.log, workload.wl), with machine-specific paths replaced: the runs
folder becomes ``/runs`` and the interpreter ``python``.  Snapshots depend on these
files: re-recording changes the numbers, so update the snapshots afterwards
(``ACCELCTL_UPDATE_GOLDEN=1 pytest tests/tui``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKLOAD = HERE / "fixtures" / "workloads" / "tiny.wl"
OUT = HERE / "fixtures" / "store"  # not "runs": .gitignore ignores every runs/ folder
KEEP = ("events.jsonl", "summary.json", "spec.json", "plan.json", "worker.log", "workload.wl")
RUNS = (("tui_train", "cpu"), ("tui_train", "cpu2"), ("tui_generate", "cpu"), ("tui_ddp", "cpu"))


def record(into: Path) -> None:
    for workload, target in RUNS:
        cmd = [sys.executable, "-m", "accelctl.cli", "run", str(WORKLOAD.relative_to(ROOT)), "-w", workload,
               "-t", target, "--headless", "--runs-dir", str(into)]
        subprocess.run(cmd, cwd=ROOT, check=True)


def sanitize(text: str, run_root: Path) -> str:
    text = text.replace(str(run_root), "/runs").replace(sys.executable, "python").replace(str(ROOT) + "/", "")
    return text.replace(str(Path(sys.executable).resolve()), "python")


def copy(src_root: Path) -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    for run in sorted(p for p in src_root.iterdir() if p.is_dir()):
        dest = OUT / run.name
        dest.mkdir(parents=True)
        for name in KEEP:
            if (run / name).exists():
                (dest / name).write_text(sanitize((run / name).read_text(encoding="utf-8"), src_root), encoding="utf-8")
        json.loads((dest / "summary.json").read_text())  # still valid JSON
        print(f"{dest.relative_to(ROOT)}: {sum(f.stat().st_size for f in dest.iterdir())} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", type=Path, help="copy the runs of this folder instead of recording")
    args = ap.parse_args()
    if args.src:
        copy(args.src.resolve())
        return
    with tempfile.TemporaryDirectory() as tmp:
        record(Path(tmp))
        copy(Path(tmp))


if __name__ == "__main__":
    main()

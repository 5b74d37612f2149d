"""Where the wall time of ``accelctl run FILE --headless`` goes, start to end (issue 28 item 3).

    python bench/run_startup.py N WORKLOAD.wl [run options ...] -- TREE [TREE ...]

runs ``accelctl run`` N times from each TREE (a checkout of accelctl with its ``.venv``),
interleaved (tree A, tree B, tree A, ...: a change of the machine's load reaches both alike),
under ``strace -f -e trace=execve,exit_group`` (seccomp-bpf: only those two calls stop the
processes), and prints the median and range of each stage and the machine's load:

    viewer_start -> viewer_exec -> supervisor_exec -> runner_ready -> [torchrun_exec] ->
    worker_exec -> worker_setup_phase -> run_started -> first_step -> last_step ->
    run_finished -> worker_exit -> summary -> viewer_exit

The execs and the first worker's exit are strace's; the rest is the run's own record:
``runner.json`` (``started_unix_s``), the events of rank 0 (``phase setup`` is written once the
worker has imported torch; ``run_started`` once the model is built and the peak probe done, its
``setup_s`` says how long each took) and ``summary.json`` (``finished_unix_s``).  ``STRACE=0``
leaves strace out (the exec and exit marks with it).  Not part of ``python -m bench``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = ["viewer_start", "viewer_exec", "supervisor_exec", "runner_ready", "torchrun_exec", "worker_exec",
          "worker_setup_phase", "run_started", "first_step", "last_step", "run_finished", "worker_exit", "summary",
          "viewer_exit"]
_EXEC = re.compile(r"(\d+)\s+([\d.]+) execve\(\"([^\"]+)\", \[(.*?)\]")
_EXIT = re.compile(r"(\d+)\s+([\d.]+) exit_group")


def exec_marks(trace: Path) -> dict[str, float]:
    """The viewer's, the supervisor's, torchrun's and the first worker's exec, and that worker's exit."""
    marks: dict[str, float] = {}
    worker = None
    for line in trace.read_text().splitlines():
        m = _EXEC.match(line)
        if m and "python" in m[3]:
            argv = m[4]
            if "accelctl.cli" in argv:
                marks.setdefault("supervisor_exec" if "viewer_exec" in marks else "viewer_exec", float(m[2]))
            elif "torch.distributed.run" in argv:
                marks.setdefault("torchrun_exec", float(m[2]))
            elif "accelctl.worker" in argv and worker is None:
                worker = m[1]  # (through the exec prologue: same pid, the worker's exec comes next)
            if "-m\", \"accelctl.worker" in argv and m[1] == worker:
                marks["worker_exec"] = float(m[2])
        m = _EXIT.match(line)
        if m and m[1] == worker:
            marks["worker_exit"] = float(m[2])
    return marks


def run_marks(run_dir: Path) -> tuple[dict[str, float], dict]:
    """The stages the run's own files time, and rank 0's ``setup_s``."""
    marks = {"runner_ready": json.loads((run_dir / "runner.json").read_text())["started_unix_s"],
             "summary": json.loads((run_dir / "summary.json").read_text())["finished_unix_s"]}
    steps, setup = [], {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("rank", 0) != 0:
            continue
        if e["kind"] == "phase" and e["phase"] == "setup":
            marks.setdefault("worker_setup_phase", e["time_unix_s"])
        elif e["kind"] == "run_started":
            marks["run_started"], setup = e["time_unix_s"], e["details"].get("setup_s") or {}
        elif e["kind"] == "step":
            steps.append(e["time_unix_s"])
        elif e["kind"] == "run_finished":
            marks["run_finished"] = e["time_unix_s"]
    marks["first_step"], marks["last_step"] = steps[0], steps[-1]
    return marks, setup


def one_run(tree: Path, argv: list[str], work: Path, strace: bool) -> tuple[dict[str, float], dict]:
    runs, trace = work / "runs", work / "strace.txt"
    shutil.rmtree(runs, ignore_errors=True)
    cmd = [str(tree / ".venv/bin/python"), "-m", "accelctl.cli", "run", *argv, "--headless", "--runs-dir", str(runs)]
    if strace:
        cmd = ["strace", "--seccomp-bpf", "-f", "-ttt", "-qq", "-e", "trace=execve,exit_group", "-e", "signal=none",
               "-o", str(trace), *cmd]
    started = time.time()
    done = subprocess.run(cmd, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    ended = time.time()
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
    marks, setup = run_marks(next(runs.iterdir()))
    marks.update(exec_marks(trace) if strace else {}, viewer_start=started, viewer_exit=ended)
    return marks, setup


def stages(marks: dict[str, float]) -> dict[str, float]:
    present = [s for s in STAGES if s in marks]
    out = {f"{a} -> {b}": marks[b] - marks[a] for a, b in zip(present, present[1:])}
    out["total"] = marks["viewer_exit"] - marks["viewer_start"]
    return out


def main(args: list[str]) -> int:
    if "--" not in args or len(args) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    n, argv, trees = int(args[0]), args[1:args.index("--")], [Path(t).resolve() for t in args[args.index("--") + 1:]]
    argv = [str(Path(argv[0]).resolve()), *argv[1:]] if Path(argv[0]).exists() else argv
    strace = os.environ.get("STRACE", "1") == "1" and shutil.which("strace") is not None
    seen: dict[Path, list[tuple[dict[str, float], dict]]] = {t: [] for t in trees}
    loads = []
    with tempfile.TemporaryDirectory(prefix="run-startup-") as work:
        for _ in range(n):
            for tree in trees:
                loads.append(os.getloadavg()[0])
                seen[tree].append(one_run(tree, argv, Path(work), strace))
    print(f"{n} runs per tree, interleaved; load (1 min) median {statistics.median(loads):.2f}, "
          f"{min(loads):.2f}..{max(loads):.2f}; strace {'on' if strace else 'off'}")
    for tree, runs in seen.items():
        print(f"== {tree}")
        table = [stages(marks) for marks, _ in runs]
        for key in table[0]:
            vals = [t[key] for t in table if key in t]
            print(f"  {key:45s} median {statistics.median(vals):7.3f}  [{min(vals):.3f} .. {max(vals):.3f}]")
        for key in runs[0][1]:
            print(f"  setup_s.{key:37s} median {statistics.median(s.get(key, 0.0) for _, s in runs):7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

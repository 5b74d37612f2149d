"""Does the TUI slow the run it watches?  Runs one small CPU workload with and without
the TUI attached and compares the steady-state median step time (``summary.json``,
``accelctl.analysis.stats.steady_state``: warm-up excluded).

    .venv/bin/python bench/tui_overhead.py                 # 5 rounds, 200 steps, TUI in a pty
    .venv/bin/python bench/tui_overhead.py --rounds 3 --steps 100 --tui run_test --size 120x40

Modes, each a fresh process per run, so both pay the same start-up:

* ``headless``: ``accelctl run FILE --headless`` (its supervisor's plain console stream, copied
  by the viewer), output drained;
* ``pty`` (default TUI): ``accelctl run FILE`` in a pseudo terminal of ``--size``: the run's
  supervisor and the TUI viewing it, as on a real terminal; its output read and discarded as a
  terminal would -- the real rendering and terminal writes; ``q`` is typed once the run's
  ``summary.json`` exists;
* ``run_test``: the in-process ``run_live`` with a headless Textual app (no terminal, no
  supervisor process: the app's own cost beside the run, for comparison).

Rounds alternate the order (headless first, then TUI first) so a drift of the machine's
speed does not favour one side.  Reports each run's median, the median over runs of
each mode, their ratio (TUI / headless), and the median of the per-round ratios.  The
target is a ratio within 2 %; on a busy 2-core machine the run-to-run spread is often
larger than that, so look at the spread printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = """\
# bench/tui_overhead.py: a small causal-LM training loop, one thread, many steps
workload tui_overhead {{
  task pretrain {{ objective = causal_lm }}
  model gpt2(layers = 2, hidden = 64, heads = 4, vocab = 512, max_positions = 64)
  dataset synthetic(seq_len = 64 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch {{ micro = 4  accumulation = 1  global = 4 }}
  measure {{ warmup = 5 steps  steps = {steps} steps }}
  target cpu {{ devices = 1  threads = 1 }}
}}
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _only_run(runs: Path, before: set[str]) -> Path:
    new = [p for p in runs.iterdir() if p.name not in before]
    if len(new) != 1:
        raise RuntimeError(f"expected one new run under {runs}, found {new}")
    return new[0]


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of one process so far (itself only, not the worker)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _finish(run: Path, front_cpu: float | None) -> Path:
    if front_cpu is not None:
        (run / "bench_front_cpu_s").write_text(str(front_cpu))
    return run


def run_headless(wl: Path, runs: Path, timeout: float) -> Path:
    before = {p.name for p in runs.iterdir()} if runs.exists() else set()
    cmd = [sys.executable, "-m", "accelctl.cli", "run", str(wl), "--headless", "--runs-dir", str(runs)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    front = None
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        front = cpu_s(proc.pid) or front
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError("the headless run did not end in time")
        time.sleep(0.05)
    if proc.returncode != 0:
        raise RuntimeError(f"headless run exited {proc.returncode}")
    return _finish(_only_run(runs, before), front)


def _ended(runs: Path, before: set[str]) -> bool:
    """The new run's ``summary.json`` is written (the supervisor writes it as the run ends)."""
    return any((p / "summary.json").exists() for p in runs.iterdir() if p.name not in before) if runs.exists() else False


def run_pty(wl: Path, runs: Path, timeout: float, size: tuple[int, int]) -> Path:
    import fcntl
    import termios

    before = {p.name for p in runs.iterdir()} if runs.exists() else set()
    master, slave = pty.openpty()
    cols, rows = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = _env() | {"TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
    cmd = [sys.executable, "-m", "accelctl.cli", "run", str(wl), "--runs-dir", str(runs)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    deadline = time.monotonic() + timeout
    written = 0
    front = None
    next_q = 0.0
    try:
        while True:  # be the terminal: read everything the app draws
            front = cpu_s(proc.pid) or front
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    data = b""
                if not data and proc.poll() is not None:
                    break
                written += len(data)
                if b"\x1b[6n" in data:  # a cursor-position query: answer like a terminal
                    os.write(master, f"\x1b[{rows};1R".encode())
            elif proc.poll() is not None:
                break
            if _ended(runs, before) and time.monotonic() >= next_q:  # the run has ended: leave the TUI
                os.write(master, b"q")
                next_q = time.monotonic() + 0.5
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError("the TUI run did not end in time")
    finally:
        os.close(master)
        proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"TUI run exited {proc.returncode}")
    run = _only_run(runs, before)
    (run / "bench_terminal_bytes").write_text(str(written))
    return _finish(run, front)


def run_run_test(wl: Path, runs: Path, timeout: float, size: tuple[int, int]) -> Path:
    before = {p.name for p in runs.iterdir()} if runs.exists() else set()
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from accelctl.api import load, plan\n"
        "from accelctl.tui.live import run_live\n"
        f"spec = load({str(wl)!r})[0]\n"
        f"rc = run_live(plan(spec, 'cpu'), spec, Path({str(wl)!r}).read_text(), {str(runs)!r}, headless=True,"
        f" auto_exit=True, size={size!r}, lower_priority=True)\n"
        "sys.exit(rc)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, timeout=timeout)
    return _only_run(runs, before)


def median_step_s(run: Path) -> float:
    summary = json.loads((run / "summary.json").read_text())
    if summary.get("status") != "ok":
        raise RuntimeError(f"{run.name}: status {summary.get('status')}")
    return float(summary["stats"]["step_time"]["median"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="pairs of runs (default 5)")
    ap.add_argument("--steps", type=int, default=200, help="measured steps per run (default 200)")
    ap.add_argument("--tui", choices=("pty", "run_test"), default="pty", help="how the TUI is attached")
    ap.add_argument("--size", default="80x24", help="terminal size for the TUI (default 80x24)")
    ap.add_argument("--nice", type=int, default=None,
                    help="ACCELCTL_TUI_NICE for the TUI (default: the TUI's own, 10; 0 turns it off)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    size = tuple(int(x) for x in args.size.lower().split("x"))
    if args.nice is not None:
        os.environ["ACCELCTL_TUI_NICE"] = str(args.nice)  # read by the TUI child (accelctl.tui.priority)

    with tempfile.TemporaryDirectory(prefix="tui-overhead-") as tmp:
        wl = Path(tmp) / "tui_overhead.wl"
        wl.write_text(WORKLOAD.format(steps=args.steps))
        runs = Path(tmp) / "runs"
        runs.mkdir()

        def tui(w, r, t):
            return run_pty(w, r, t, size) if args.tui == "pty" else run_run_test(w, r, t, size)

        modes = {"headless": lambda w, r, t: run_headless(w, r, t), "tui": tui}
        results: dict[str, list[float]] = {"headless": [], "tui": []}
        ratios = []
        term_bytes = []
        front_cpu: dict[str, list[float]] = {"headless": [], "tui": []}
        t0 = time.monotonic()
        for i in range(args.rounds):
            order = ("headless", "tui") if i % 2 == 0 else ("tui", "headless")
            this = {}
            for mode in order:
                run = modes[mode](wl, runs, args.timeout)
                this[mode] = median_step_s(run)
                results[mode].append(this[mode])
                if (run / "bench_front_cpu_s").exists():
                    front_cpu[mode].append(float((run / "bench_front_cpu_s").read_text()))
                if (run / "bench_terminal_bytes").exists():
                    term_bytes.append(int((run / "bench_terminal_bytes").read_text()))
                print(f"round {i + 1}/{args.rounds} {mode:>8}: median step {this[mode] * 1e3:7.3f} ms", flush=True)
            ratios.append(this["tui"] / this["headless"])
        wall = time.monotonic() - t0

    med = {m: statistics.median(v) for m, v in results.items()}
    spread = {m: (statistics.stdev(v) / statistics.fmean(v) if len(v) > 1 else 0.0) for m, v in results.items()}
    ratio = med["tui"] / med["headless"]
    out = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "tui_mode": args.tui, "size": args.size, "nice": os.environ.get("ACCELCTL_TUI_NICE", "default"),
        "rounds": args.rounds, "steps": args.steps,
        "median_step_ms": {m: v * 1e3 for m, v in med.items()},
        "runs_ms": {m: [x * 1e3 for x in v] for m, v in results.items()},
        "run_to_run_cv": spread,
        "ratio_tui_over_headless": ratio,
        "median_paired_ratio": statistics.median(ratios),
        "paired_ratios": ratios,
        "front_end_cpu_s_median": {m: statistics.median(v) if v else None for m, v in front_cpu.items()},
        "terminal_bytes_per_tui_run": statistics.median(term_bytes) if term_bytes else None,
        "wall_s": wall,
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
    }
    print()
    print(f"headless median step {med['headless'] * 1e3:.3f} ms (run-to-run CV {spread['headless'] * 100:.1f} %)")
    print(f"TUI ({args.tui}, {args.size}) median step {med['tui'] * 1e3:.3f} ms "
          f"(run-to-run CV {spread['tui'] * 100:.1f} %)")
    print(f"ratio TUI / headless: {ratio:.4f} ({(ratio - 1) * 100:+.2f} %); median of per-round ratios "
          f"{statistics.median(ratios):.4f}; target within 2 %")
    fc = out["front_end_cpu_s_median"]
    if fc["headless"] is not None and fc["tui"] is not None:
        print(f"CPU of the viewer process (the console copy or the TUI; not the supervisor, not the worker): headless {fc['headless']:.2f} s,"
              f" TUI {fc['tui']:.2f} s per run")
    print(f"({args.rounds} rounds x {args.steps} steps, {wall:.0f} s, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f})")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

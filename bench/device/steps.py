"""The accelctl commands of the device check, each a child process with its own timeout.

A command that outlives its time gets SIGINT (accelctl run stops its run as Ctrl-C does:
events flushed, workers ended), then SIGKILL of its whole process group after a grace, so
nothing it started outlives the check.  Every command's output goes to the log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bench.device.parts import ROOT, TARGET, Part

#: seconds between SIGINT and SIGKILL of a command that ran out of time
GRACE_S = 15.0
#: the same when the check itself is stopped (SIGTERM from scripts/device-check.sh's `timeout -k 10`)
INTERRUPTED_GRACE_S = 4.0


@dataclass
class Outcome:
    argv: list[str]
    returncode: int | None
    seconds: float
    stdout: str
    timed_out: bool = False
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def accelctl(*args: str) -> list[str]:
    return [sys.executable, "-m", "accelctl.cli", *args]


def run_command(argv: list[str], timeout_s: float, log: TextIO, env: dict[str, str] | None = None) -> Outcome:
    """``argv`` in its own process group, stdout captured, stderr into ``log``; stopped at ``timeout_s``."""
    log.write(f"\n$ {' '.join(argv)}   (timeout {timeout_s:.0f} s)\n")
    log.flush()
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                                stderr=log, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError as exc:
        return Outcome(argv, None, 0.0, "", error=f"{type(exc).__name__}: {exc}")
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=max(timeout_s, 1.0))
    except subprocess.TimeoutExpired:
        timed_out = True
        out = _stop(proc)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM from the check's own timeout: the child goes too,
        _stop(proc, INTERRUPTED_GRACE_S)  # before `timeout -k 10` kills this process
        raise
    seconds = time.perf_counter() - t0
    log.write(f"# exit {proc.returncode} after {seconds:.1f} s{' (TIMED OUT)' if timed_out else ''}\n")
    log.flush()
    return Outcome(argv, proc.returncode, seconds, out or "", timed_out=timed_out)


def _stop(proc: subprocess.Popen, grace_s: float | None = None) -> str:
    """SIGINT to the group (a clean stop), then SIGKILL to what is left of it."""
    out = ""
    for sig, wait_s in ((signal.SIGINT, GRACE_S if grace_s is None else grace_s), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            more, _ = proc.communicate(timeout=wait_s)
            out += more or ""
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # whatever of the group outlived its leader
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return out


def json_reply(outcome: Outcome) -> dict[str, Any] | None:
    """accelctl's ``--json``/``-f json`` document on stdout, or None."""
    text = outcome.stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def estimates(parts: list[Part], runs_dir: Path, log: TextIO, timeout_s: float = 120.0,
              calibrated: bool = False, target: str = TARGET) -> dict[str, dict[str, Any]]:
    """``accelctl estimate FILES -t TARGET -f json``: the record of each part's workload, by part name
    (with the run store's calibration when ``calibrated``, else the catalog's factors only)."""
    args = ["estimate", *[str(p.path) for p in parts], "-t", target, "-f", "json", "--runs-dir", str(runs_dir)]
    if not calibrated:
        args.append("--no-calibration")
    outcome = run_command(accelctl(*args), timeout_s, log)
    try:
        records = json.loads(outcome.stdout) if outcome.returncode == 0 else []
    except json.JSONDecodeError:
        records = []
    if isinstance(records, dict):  # the reply document: {"result": {"estimates": [...]}}
        records = records.get("result", records).get("estimates", [])
    by_workload = {r.get("workload"): r for r in records}
    return {p.name: by_workload[w] for p in parts if (w := workload_name(p)) in by_workload}


def workload_name(part: Part) -> str:
    """The workload name written in the part's file (``workload NAME {``)."""
    for line in part.path.read_text(encoding="utf-8").splitlines():
        if line.startswith("workload "):
            return line.split()[1]
    return ""


def run_part(part: Part, runs_dir: Path, log: TextIO, timeout_s: float, rehearse: bool,
             target: str = TARGET) -> dict[str, Any]:
    """``accelctl run FILE -t TARGET --headless --json`` (``--rehearse`` on a CPU): the run's id,
    status and summary; a run cut by its timeout is read from its folder as far as it got."""
    before = set(os.listdir(runs_dir)) if runs_dir.is_dir() else set()
    args = ["run", str(part.path), "-t", target, "--headless", "--json", "--runs-dir", str(runs_dir)]
    if rehearse:
        args.append("--rehearse")
    outcome = run_command(accelctl(*args), timeout_s, log)
    reply = json_reply(outcome)
    runs = (reply or {}).get("result", {}).get("runs", []) if reply else []
    diagnostics = [d.get("message", "") for d in (reply or {}).get("diagnostics") or []]
    row: dict[str, Any] = {"seconds": round(outcome.seconds, 1), "exit": outcome.returncode,
                           "timed_out": outcome.timed_out, "error": outcome.error or "; ".join(diagnostics)[:500]}
    folder = None
    if runs:
        folder = Path(runs[0].get("run_dir") or runs_dir / runs[0]["run_id"])
    else:
        new = sorted(set(os.listdir(runs_dir)) - before) if runs_dir.is_dir() else []
        new = [n for n in new if (runs_dir / n).is_dir()]
        folder = runs_dir / new[-1] if new else None
    if folder is not None:
        row["run_id"] = folder.name
        summary = folder / "summary.json"
        if summary.is_file():
            row["summary"] = json.loads(summary.read_text(encoding="utf-8"))
    return row


def calibrate(run_ids: list[str], runs_dir: Path, log: TextIO, timeout_s: float = 120.0,
              target: str = TARGET) -> dict[str, Any]:
    """``accelctl estimate --calibrate RUN...``: the factors fitted to the recorded runs, stored
    beside them (the estimate after the runs reads them).  A run the fit refuses (E581: no step
    time, no datasheet, a rehearsal) is named, dropped and the rest fitted."""
    dropped: dict[str, str] = {}
    ids = list(run_ids)
    first = str(sorted(ROOT.joinpath("workloads", "device").glob("*.wl"))[0])
    while ids:
        outcome = run_command(accelctl("estimate", first, "-t", target, "--json", "--runs-dir", str(runs_dir),
                                       "--calibrate", *ids), timeout_s, log)
        reply = json_reply(outcome) or {}
        if outcome.returncode == 0:
            return {"status": "ok", "runs": ids, "dropped": dropped, **reply.get("result", {}).get("calibration", {})}
        messages = [d.get("message", "") for d in reply.get("diagnostics") or []]
        refused = [i for i in ids if any(f"run {i} " in m for m in messages)]
        if not refused:
            return {"status": "failed", "why": "; ".join(messages) or f"exit {outcome.returncode}", "dropped": dropped}
        for i in refused:
            dropped[i] = next(m for m in messages if f"run {i} " in m)
        ids = [i for i in ids if i not in refused]
    return {"status": "not run", "why": "no run the fit takes" + (f" ({len(dropped)} refused)" if dropped else ""),
            "dropped": dropped}

"""``python -m bench.device OUT_DIR [--dry | --cpu-smoke] [--budget-s S] [--only PART ...]``.

Device mode (the GPU machine, via scripts/device-check.sh): facts of the device, ``accelctl
estimate`` of every part, each part's ``accelctl run`` inside the wall budget (a part starts
only with 20 s left; its timeout is its own or what is left, the smaller), ``estimate
--calibrate`` with the finished runs, the estimate again; the record is rewritten after every
step, so a check cut short still leaves what it measured.  Exit 0 when every part ran ok.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.device import steps, table, wheels
from bench.device.parts import BY_NAME, PARTS, ROOT, TARGET, TARGETS, target_for

SAMPLE = Path(__file__).resolve().parent / "sample.json"
WHEEL_LIST = ROOT / "scripts" / "device-wheels.txt"
#: seconds kept for --calibrate and the estimate after the runs
RESERVE_S = 25.0
#: a part is not started with less than this left of the budget
MIN_START_S = 20.0
#: --cpu-smoke: each part's timeout times this (inductor compiles C++ on a CPU, for minutes)
CPU_SLOWER = 4
FACTS_CODE = """
import json, importlib.metadata as md, torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    out.update(device=torch.cuda.get_device_name(0), capability=".".join(map(str, torch.cuda.get_device_capability(0))),
               gpu_memory=f"{p.total_memory / 2**30:.1f} GiB", nccl=str(torch.cuda.nccl.version()))
for name in ("transformers", "timm", "torchao", "deepspeed", "pydantic", "lark"):
    try:
        out[name] = md.version(name)
    except md.PackageNotFoundError:
        out[name] = "missing"
print(json.dumps(out))
"""


def facts(kind: str, log) -> dict[str, Any]:
    """What ran where: device, driver, torch / CUDA and library versions, accelctl's commit."""
    out: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    commit = _quiet(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    if commit:
        out["accelctl_commit"] = commit
    if kind == "sample":
        return out
    smi = _quiet(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    if smi:
        name, driver, memory = [x.strip() for x in smi.splitlines()[0].split(",")][:3]
        out.update(device=name, driver=driver, gpu_memory=memory)
    probe = steps.run_command([sys.executable, "-c", FACTS_CODE], 120, log)
    try:
        probed = json.loads(probe.stdout.strip().splitlines()[-1])
        out.update({k: v for k, v in probed.items() if v is not None and k not in out})  # nvidia-smi's first
    except (json.JSONDecodeError, IndexError):
        out["torch"] = f"probe failed (exit {probe.returncode}): see the log"
    if kind == "cpu-smoke":
        from accelctl.hostinfo import cpu_model

        out["device"] = f"{cpu_model()} (CPU smoke, stand-in shapes)"
    return out


def _quiet(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


class Check:
    """The record, rewritten to OUT_DIR after every step."""

    def __init__(self, out: Path, kind: str, budget_s: float) -> None:
        self.out, self.t0 = out, time.monotonic()
        self.record: dict[str, Any] = {"kind": kind, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                       "budget_s": budget_s, "target": TARGET, "parts": {}, "skipped": {}}

    def left(self) -> float:
        return self.record["budget_s"] - (time.monotonic() - self.t0)

    def save(self) -> None:
        self.record["wall_s"] = round(time.monotonic() - self.t0, 1)
        (self.out / "device-check.json").write_text(json.dumps(self.record, indent=2, sort_keys=True, default=str)
                                                    + "\n", encoding="utf-8")
        (self.out / "device-check.md").write_text(table.markdown(self.record), encoding="utf-8")


def run_parts(check: Check, parts, runs_dir: Path, log, rehearse: bool) -> None:
    for part in parts:
        left = check.left() - RESERVE_S
        if left < MIN_START_S:
            check.record["skipped"][part.name] = f"not started: {max(left, 0):.0f} s left of the budget"
            print(f"device check: {part.name}: skipped ({check.record['skipped'][part.name]})", flush=True)
            continue
        timeout = min(part.timeout_s * (CPU_SLOWER if rehearse else 1), left)
        target = check.record["target"]
        print(f"device check: {part.name}: accelctl run {part.path.relative_to(ROOT)} -t {target} "
              f"(timeout {timeout:.0f} s)", flush=True)
        row = steps.run_part(part, runs_dir, log, timeout, rehearse, target)
        check.record["parts"][part.name] = row
        measured = table.measured_s(row)
        status = ((row.get("summary") or {}).get("status")
                  or ("timed out" if row["timed_out"] else f"exit {row['exit']}"))
        print(f"device check: {part.name}: {status}, median {measured if measured is None else round(measured, 4)} s, "
              f"{row['seconds']} s wall", flush=True)
        check.save()


def dry(check: Check, parts, runs_dir: Path, log) -> bool:
    """Plans and estimates of every part, the wheel list, the table from the recorded sample."""
    ok = True
    plans = {}
    for part in parts:
        argv = steps.accelctl("plan", str(part.path), "-t", check.record["target"], "--json")
        outcome = steps.run_command(argv, 120, log)
        reply = steps.json_reply(outcome) or {}
        planned = ((reply.get("result") or {}).get("plans") or [{}])[0]
        backend = (planned.get("plan") or {}).get("backend")
        plans[part.name] = {"ok": outcome.returncode == 0, "backend": backend,
                            "diagnostics": [d.get("message") for d in reply.get("diagnostics") or []]}
        ok &= outcome.returncode == 0
        print(f"device check --dry: plan {part.name}: {'ok' if outcome.returncode == 0 else 'FAILED'}"
              f"{f' (backend {backend})' if backend else ''}", flush=True)
    check.record["plans"] = plans
    listed, problems = wheels.read(WHEEL_LIST)
    problems += wheels.check_list(listed)
    check.record["wheels"] = {"listed": [f"{w.name}=={w.version}" for w in listed],
                              "mib": round(sum(w.size for w in listed) / 2**20, 2), "problems": problems}
    print(f"device check --dry: wheels: {len(listed)} listed, {check.record['wheels']['mib']} MiB: "
          f"{'ok' if not problems else 'FAILED: ' + '; '.join(problems)}", flush=True)
    ok &= not problems
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    sample["kind"] = "sample"
    check.record["sample"] = sample
    (check.out / "device-check-sample.md").write_text(table.markdown(sample), encoding="utf-8")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.device", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for device-check.json, .md and .log (at most 4 files)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--dry", action="store_true", help="no GPU: plan, estimate, wheel list, table from the sample")
    mode.add_argument("--cpu-smoke", action="store_true", help="every part rehearsed on this CPU (stand-in shapes)")
    ap.add_argument("--budget-s", type=float, default=300.0, help="wall budget of the runs (default 300)")
    ap.add_argument("--only", nargs="+", choices=list(BY_NAME),
                    help="these parts only, in this order (a rerun of what failed; what was never measured first)")
    ap.add_argument("--target", choices=sorted(set(TARGETS.values())),
                    help="the workloads' target (default: the one of the GPU found, h100 without one)")
    ap.add_argument("--runs-dir", type=Path, help="run store (default OUT/../device-check-runs)")
    args = ap.parse_args(argv)
    kind = "sample" if args.dry else "cpu-smoke" if args.cpu_smoke else "device"
    parts = [BY_NAME[name] for name in dict.fromkeys(args.only)] if args.only else list(PARTS)
    args.out.mkdir(parents=True, exist_ok=True)
    runs_dir = (args.runs_dir or args.out.resolve().parent / f"{args.out.resolve().name}-runs").resolve()
    runs_dir.mkdir(parents=True, exist_ok=True)
    check = Check(args.out, "dry" if args.dry else kind, args.budget_s)
    check.record["order"] = [p.name for p in parts]
    signal.signal(signal.SIGTERM, _stopped)  # `timeout` ends the check: the part running is stopped first
    try:
        return checked(args, kind, parts, runs_dir, check)
    except KeyboardInterrupt as exc:
        check.record["interrupted"] = str(exc) or "SIGINT"
        check.save()
        print(f"device check: interrupted ({check.record['interrupted']}); partial record in {args.out}",
              file=sys.stderr)
        return 130


def _stopped(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def checked(args, kind: str, parts, runs_dir: Path, check: Check) -> int:
    with open(args.out / "device-check.log", "w", encoding="utf-8") as log:
        check.record["facts"] = facts(kind, log)
        check.record["target"] = args.target or target_for(check.record["facts"].get("device", "")
                                                           if kind == "device" else "")
        check.save()
        if kind == "device" and not check.record["facts"].get("cuda_available"):
            print("device check: no CUDA device here (torch.cuda.is_available() is False); "
                  "use --dry or --cpu-smoke on a machine without a GPU", file=sys.stderr)
            return 2
        target = check.record["target"]
        check.record["estimate_before"] = steps.estimates(parts, runs_dir, log, target=target)
        check.save()
        if args.dry:
            ok = dry(check, parts, runs_dir, log)
            check.save()
            print(table.markdown(check.record["sample"]))
            return 0 if ok and len(check.record["estimate_before"]) == len(parts) else 1
        run_parts(check, parts, runs_dir, log, rehearse=kind == "cpu-smoke")
        finished = [r["run_id"] for r in check.record["parts"].values()
                    if (r.get("summary") or {}).get("status") == "ok"]
        check.record["calibration"] = steps.calibrate(finished, runs_dir, log, target=target)
        check.record["estimate_after"] = steps.estimates(parts, runs_dir, log, calibrated=True, target=target)
        check.save()
    print(table.markdown(check.record))
    print(f"device check: wrote {args.out}/device-check.json, .md, .log; runs in {runs_dir}")
    return 0 if len(finished) == len(parts) else 1


if __name__ == "__main__":
    sys.exit(main())

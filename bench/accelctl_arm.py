"""The accelctl side of a comparison: ``accelctl run FILE --headless`` as a user runs it,
and what its run folders say.

``run_accelctl`` starts the CLI in a fresh process (pinned to a core when asked), waits
for it, and reads each new run folder's ``rank0.jsonl`` events.  Metrics:

* ``step_s``: median measured step (``phase == "measure"`` steps only, warm-up excluded:
  the same definition the bare baselines use), of the file's first workload;
* ``wall_s``: the whole command, start to exit;
* ``start_*``: from ``accelctl run`` to the first measured step, split by the worker's own
  events and timings -- ``start_to_worker_code`` (CLI + plan + spawn + the worker's
  ``import torch``, up to its ``setup`` phase event), ``start_peak_probe`` (the matmul
  peak probe for MFU, when it ran), ``start_build`` (model build + data + optimizer:
  ``setup_s.build_s``), ``start_setup_other`` (the rest of the worker's setup), then
  ``start_first_step`` (warm-up step 1) and ``start_warmup_rest``;
* ``end_last_step_to_exit``: from the last step event (of the file's last workload) to the
  command's exit (summary, interpreter shutdown);
* ``params``, ``first_loss``, ``final_loss``: the model's parameter count and the first and
  last step's loss (warm-up included), to hold against a baseline that reports them.

``run_worker`` is the worker alone, as the runner starts it but without CLI or runner:
``python -m accelctl.worker job.json`` of a job ``planned_job`` took from ``accelctl plan``
(once per session), with its own run folder as ``events_dir``; same metrics (``wall_s``:
the worker process, start to exit).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import uuid
from pathlib import Path

from bench.harness import ROOT, base_env, run_timed


def sized_workload(src: Path, workdir: Path, warmup: int | None, steps: int | None) -> Path:
    """A copy of ``src`` with every ``measure { warmup = W steps  steps = S steps }`` set to
    the given sizes (``--quick``), or ``src`` itself when neither is given."""
    if warmup is None and steps is None:
        return src
    text = src.read_text()
    if warmup is not None:
        text = re.sub(r"warmup\s*=\s*\d+\s*steps?", f"warmup = {warmup} steps", text)
    if steps is not None:
        text = re.sub(r"(?<![a-z_])steps\s*=\s*\d+\s*steps?", f"steps = {steps} steps", text)
    out = workdir / f"{src.stem}-w{warmup}-s{steps}.wl"
    out.write_text(text)
    return out


def _events(run: Path) -> list[dict]:
    with open(run / "rank0.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_metrics(run: Path, started_unix: float, ended_unix: float) -> dict[str, float]:
    """Step and start-up figures of one run folder (see the module doc)."""
    events = _events(run)
    out: dict[str, float] = {}
    measured = [e["step_time_s"] for e in events if e["kind"] == "step" and e.get("phase") == "measure"]
    if measured:
        out["step_s"] = statistics.median(measured)
    losses = [e["loss"] for e in events if e["kind"] == "step" and e.get("loss") is not None]
    if losses:
        out["first_loss"], out["final_loss"] = losses[0], losses[-1]
    setup = next((e for e in events if e["kind"] == "phase" and e.get("phase") == "setup"), None)
    begun = next((e for e in events if e["kind"] == "run_started"), None)
    steps = [e for e in events if e["kind"] == "step"]
    if setup:
        out["start_to_worker_code"] = setup["time_unix_s"] - started_unix
    if begun and begun.get("details", {}).get("params"):
        out["params"] = begun["details"]["params"]
    if setup and begun:
        parts = begun.get("details", {}).get("setup_s", {})
        out["start_peak_probe"] = parts.get("peak_probe_s", 0.0)
        out["start_build"] = parts.get("build_s", 0.0)
        out["start_setup_other"] = (begun["time_unix_s"] - setup["time_unix_s"]
                                    - out["start_peak_probe"] - out["start_build"])
    if begun and steps:
        first = steps[0]
        out["start_first_step"] = first["step_time_s"]
        first_measured = next((e for e in steps if e.get("phase") == "measure"), None)
        if first_measured:
            out["start_warmup_rest"] = (first_measured["time_unix_s"] - first_measured["step_time_s"]
                                        - first["time_unix_s"])
        out["end_last_step_to_exit"] = ended_unix - steps[-1]["time_unix_s"]
    return out


def check_architecture(run: Path, expect: dict) -> None:
    """The model accelctl built is the one the baseline builds: every dimension the comparison
    gives its baseline must equal the job's ``architecture`` (a default the workload left
    out -- a stand-in's vocab or ffn -- would otherwise make the two arms different models)."""
    arch = json.loads((run / "job.json").read_text())["architecture"]
    wrong = {k: (v, arch.get(k)) for k, v in expect.items() if arch.get(k) != v}
    if wrong:
        raise RuntimeError(f"{run.name}: the baseline's shape differs from the job's (baseline, accelctl): {wrong}")


def run_accelctl(wl: Path, workdir: Path, core: int | None, timeout: float = 1800.0,
                 extra: tuple[str, ...] = (), expect: dict | None = None) -> dict[str, float]:
    """Run ``accelctl run wl --headless`` once; metrics of its first workload's run, and the
    whole command's wall.  ``expect``: the baseline's model dimensions (``check_architecture``)."""
    runs = workdir / f"runs-{uuid.uuid4().hex[:8]}"
    cmd = [sys.executable, "-m", "accelctl.cli", "run", str(wl), "--headless", "--runs-dir", str(runs), *extra]
    started, wall, _ = run_timed(cmd, core, timeout, env=base_env())
    folders = sorted(p for p in runs.iterdir() if (p / "rank0.jsonl").exists())
    if not folders:
        raise RuntimeError(f"accelctl run {wl.name}: no run folder with events under {runs}")
    if expect:
        check_architecture(folders[0], expect)
    metrics = run_metrics(folders[0], started, started + wall)
    if len(folders) > 1:  # a file of several workloads: its last run's last step is what ends it
        metrics.pop("end_last_step_to_exit", None)
        last = run_metrics(folders[-1], started, started + wall)
        if "end_last_step_to_exit" in last:
            metrics["end_last_step_to_exit"] = last["end_last_step_to_exit"]
    metrics["wall_s"] = wall
    metrics["runs"] = float(len(folders))
    return metrics


def planned_job(wl: Path) -> tuple[dict, dict[str, str]]:
    """The worker job of ``wl``'s first workload as ``accelctl plan -f json`` renders it, and
    the environment of the plan's worker launch (what the runner adds to its own)."""
    _, _, out = run_timed([sys.executable, "-m", "accelctl.cli", "plan", str(wl), "-f", "json"], None, 300,
                          env=base_env())
    plan = json.loads(out)["result"]["plans"][0]["plan"]
    (launch,) = [x for x in plan["launches"] if "accelctl.worker" in x["argv"]]
    return plan["job"], dict(launch.get("env", {}))


def run_worker(job: dict, env: dict[str, str], workdir: Path, core: int | None, timeout: float = 1800.0,
               expect: dict | None = None) -> dict[str, float]:
    """Run ``python -m accelctl.worker job.json`` once in a fresh run folder under ``workdir``."""
    run = workdir / f"worker-{uuid.uuid4().hex[:8]}"
    run.mkdir(parents=True)
    (run / "job.json").write_text(json.dumps({**job, "events_dir": str(run)}, indent=2))
    if expect:
        check_architecture(run, expect)
    cmd = [sys.executable, "-m", "accelctl.worker", str(run / "job.json")]
    started, wall, _ = run_timed(cmd, core, timeout, env=base_env() | env, cwd=ROOT)
    if not (run / "rank0.jsonl").exists():
        raise RuntimeError(f"accelctl.worker {run.name}: wrote no events")
    return {**run_metrics(run, started, started + wall), "wall_s": wall}

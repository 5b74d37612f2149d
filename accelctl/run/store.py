"""The run store: one folder per run, holding its inputs, its events and its summary.

Layout of a run folder (``$ACCELCTL_RUNS_DIR`` or ``./runs``, then the run id)::

    20261122-023000-bert_pretrain-cpu-3fa2/
      workload.wl      the workload source text, exactly as run
      spec.json        the checked WorkloadSpec
      plan.json        the Plan, placeholders ({run_dir}) left as printed
      job.json         the WorkerJob every process reads (run_id and events_dir filled in)
      <generated>      each GeneratedFile of the plan ({run_dir} substituted)
      worker.log       stdout + stderr of every launched process
      rank<N>.jsonl    events appended by rank N (the worker writes these)
      events.jsonl     all ranks' events merged in arrival order (the runner writes it)
      summary.json     written once at the end (status, timings, steady-state stats)
      runner.json      who supervises the run (``<pid>:<start ticks>``, host) and its launches'
                       process groups: a run whose runner is gone is finished by the next reader
                       (``failed``, reason ``runner_lost``, with the partial summary)

Run ids sort by time: ``<UTC yyyymmdd-HHMMSS>-<workload>-<target>-<4 hex>``; in the names every run of
characters outside ``[A-Za-z0-9_.]`` (and every ``..``) becomes one ``_``.  This module only
reads and writes files; it starts no processes and imports nothing heavy.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelctl.contract import envnames, supervision
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import RUN_DIR, GeneratedFile, Plan
from accelctl.errors import RunError

RUNS_DIR_ENV = envnames.RUNS_DIR

WORKLOAD_FILE = "workload.wl"
SPEC_FILE = "spec.json"
PLAN_FILE = "plan.json"
JOB_FILE = "job.json"
LOG_FILE = "worker.log"
EVENTS_FILE = "events.jsonl"
SUMMARY_FILE = "summary.json"
RUNNER_FILE = "runner.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+|\.{2,}")
_ID_RE = re.compile(r"^(\d{8}-\d{6})-(.+)-([0-9a-f]{4})$")


class RunStoreError(RunError):
    """A run folder cannot be created, written or found."""


# --------------------------------------------------------------------------- paths


def runs_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding all runs: ``root``, else ``$ACCELCTL_RUNS_DIR``, else ``./runs``."""
    if root is None:
        root = os.environ.get(RUNS_DIR_ENV) or "runs"
    return Path(root).expanduser().absolute()


def safe_name(text: str, limit: int = 40) -> str:
    """``text`` reduced to ``[A-Za-z0-9_.]`` (never empty, never starting with a dot)."""
    name = re.sub(r"_+", "_", _UNSAFE.sub("_", text)).strip("_.")[:limit]
    return name or "x"


def new_run_id(workload: str, target: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{safe_name(workload)}-{safe_name(target)}-{secrets.token_hex(2)}"


def new_run_dir(workload: str, target: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Create and return a fresh, empty run folder with a unique, sortable id."""
    base = runs_root(root)
    base.mkdir(parents=True, exist_ok=True)
    for _ in range(64):
        path = base / new_run_id(workload, target)
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RunStoreError(f"could not create a unique run folder under {base}")


def inside(run_dir: Path, relpath: str) -> Path:
    """``run_dir / relpath``, refusing absolute paths and paths that escape ``run_dir``."""
    rel = relpath.replace(RUN_DIR + "/", "", 1) if relpath.startswith(RUN_DIR + "/") else relpath
    if not rel or os.path.isabs(rel):
        raise RunStoreError(f"generated file path {relpath!r} must be relative to the run folder")
    root = run_dir.resolve()
    target = (root / rel).resolve()
    if target == root or root not in target.parents:
        raise RunStoreError(f"generated file path {relpath!r} escapes the run folder {run_dir}")
    return target


def substitute(text: str, run_dir: Path, run_values: Mapping[str, str] | None = None) -> str:
    """Replace the ``{run_dir}`` placeholder with the run folder's absolute path (and each of
    ``run_values``, e.g. ``{free_port}``, with the value picked for this run)."""
    for placeholder, value in (run_values or {}).items():
        text = text.replace(placeholder, value)
    return text.replace(RUN_DIR, str(run_dir))


# --------------------------------------------------------------------------- writing


def _write(path: Path, text: str, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(path.stat().st_mode | 0o111)
    return path


def write_generated_files(run_dir: Path, files: Iterable[GeneratedFile],
                          run_values: Mapping[str, str] | None = None) -> list[Path]:
    """Write each generated file inside ``run_dir`` with ``{run_dir}`` substituted.

    Every path is checked before anything is written, so a plan with one escaping
    path writes nothing.
    """
    files = list(files)
    targets = [inside(run_dir, f.path) for f in files]
    return [_write(t, substitute(f.content, run_dir, run_values), f.executable) for t, f in zip(targets, files)]


def job_for_run(job: WorkerJob, run_dir: Path, events_dir: Path | None = None) -> WorkerJob:
    """The job as this run's processes read it: ``run_id`` is the run folder's name,
    ``events_dir`` is filled in, and ``{run_dir}`` is substituted in every string."""
    filled = replace(job, run_id=run_dir.name, events_dir=str(events_dir or run_dir))
    # substitute inside the JSON text: the placeholder may sit in any nested string
    escaped = json.dumps(str(run_dir))[1:-1]
    return WorkerJob.from_dict(json.loads(filled.to_json().replace(RUN_DIR, escaped)))


def write_inputs(
    run_dir: Path,
    plan: Plan,
    *,
    source_text: str | None,
    spec_json: str | Mapping[str, Any] | None,
    events_dir: Path | None = None,
    run_values: Mapping[str, str] | None = None,
) -> WorkerJob:
    """Write the run's inputs (workload, spec, plan, generated files, job) and return the job.

    ``job.json`` is written last, so the runner's filled-in job wins over a generated
    file of the same name.  Generated paths are checked before anything is written.
    """
    for f in plan.files:
        inside(run_dir, f.path)
    if source_text is not None:
        _write(run_dir / WORKLOAD_FILE, source_text)
    if spec_json is not None:
        text = spec_json if isinstance(spec_json, str) else json.dumps(spec_json, indent=2, sort_keys=True)
        _write(run_dir / SPEC_FILE, text)
    _write(run_dir / PLAN_FILE, plan.to_json())
    write_generated_files(run_dir, plan.files, run_values)
    job = job_for_run(plan.job, run_dir, events_dir)
    _write(run_dir / JOB_FILE, job.to_json())
    return job


def log_tail(run_dir: Path, lines: int = 30, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of the run's ``worker.log`` ("" when there is none)."""
    try:
        with open(run_dir / LOG_FILE, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - max_bytes))
            data = fh.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _write_atomic(path: Path, text: str) -> Path:
    """Write ``path`` through a temporary file and a rename (a reader never sees half of it);
    the temporary file does not outlive a failed write (a full disk)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_summary(run_dir: Path, summary: Mapping[str, Any]) -> Path:
    """Write ``summary.json`` atomically (a reader never sees half a summary)."""
    return _write_atomic(run_dir / SUMMARY_FILE, json.dumps(summary, indent=2, sort_keys=True, default=str))


def write_runner(run_dir: Path, runner: str, pgids: Iterable[int]) -> Path:
    """``runner.json``: the supervising process (``supervision.identity``), this machine, and
    the process groups of the launches started so far."""
    return _write_atomic(run_dir / RUNNER_FILE, json.dumps({
        "runner": runner, "host": _host(), "started_unix_s": time.time(), "pgids": list(pgids)}))


def mark_runner_ended(run_dir: Path, reason: str) -> bool:
    """Note in ``runner.json`` that the runner ended, unable to write the summary (``reason``),
    so that the run is not taken for one whose runner was killed.  Rewritten in place -- on a
    full disk there is no room for a new file -- and False where even that fails."""
    try:
        with open(run_dir / RUNNER_FILE, "r+", encoding="utf-8") as fh:
            info = json.loads(fh.read() or "{}")
            info["ended"] = reason
            fh.seek(0)
            fh.write(json.dumps(info))
            fh.truncate()
        return True
    except (OSError, ValueError):
        return False


def _host() -> dict[str, str]:
    """This machine and boot: a runner is judged gone only by a reader on the same one."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return {"name": os.uname().nodename, "boot_id": boot}


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class RunRecord:
    """One stored run, as listed by ``accelctl runs``."""

    id: str
    path: Path
    workload: str
    target: str
    backend: str
    #: ok, failed, stopped, or "incomplete" (no summary.json: still running, or the
    #: runner itself was killed)
    status: str
    #: start time, ISO 8601 UTC ("" when unknown)
    started: str
    #: steady-state median step time (max over ranks per step), seconds
    median_step_time_s: float | None = None
    #: steady-state median throughput, in ``throughput_unit``
    throughput: float | None = None
    #: "samples/s" or "tokens/s" (tokens for generation)
    throughput_unit: str = ""
    #: the whole summary.json ({} when absent)
    summary: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def median_step_s(self) -> float | None:
        """Alias of ``median_step_time_s`` (the name ``accelctl runs`` reads)."""
        return self.median_step_time_s

    def events(self) -> list:
        """The run's merged events (``events.jsonl``), typed."""
        from accelctl.contract.events import read_events

        path = self.path / EVENTS_FILE
        return read_events(path) if path.exists() else []

    def plan(self) -> Plan | None:
        path = self.path / PLAN_FILE
        return Plan.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def read_json(path: str | Path) -> dict[str, Any]:
    """A run file's JSON object (``summary.json``, ``spec.json``, ``plan.json``...); ``{}``
    when it is missing, unreadable, not JSON, or not an object (a run being written, an
    interrupted one).  Every reader of run folders uses this one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _headline(stats: Mapping[str, Any]) -> tuple[float | None, float | None, str]:
    step = (stats.get("step_time") or {}).get("median")
    thr = stats.get("throughput") or {}
    gen = stats.get("generation") or {}
    if gen and gen.get("tokens_per_s_median") is not None:
        return step, gen["tokens_per_s_median"], "tokens/s"
    for key, unit in (("samples_per_s", "samples/s"), ("tokens_per_s", "tokens/s")):
        value = (thr.get(key) or {}).get("median")
        if value is not None:
            return step, value, unit
    return step, None, ""


def runner_gone(path: Path) -> dict[str, Any] | None:
    """The ``runner.json`` of a run without a summary whose runner is gone for good (and whose
    launches have all ended), else None: still running, recorded on another machine, or a
    run from before runner.json."""
    if (path / SUMMARY_FILE).exists():
        return None
    info = read_json(path / RUNNER_FILE)
    host = info.get("host") or {}
    if not info.get("runner") or host.get("name") != _host()["name"]:
        return None  # another machine's run (a shared store): it cannot be judged from here
    if host.get("boot_id") == _host()["boot_id"] and supervision.alive(str(info["runner"])):
        return None
    from accelctl.run import procgroup

    if host.get("boot_id") == _host()["boot_id"] and (
            any(procgroup.live_members(int(g)) for g in info.get("pgids") or [])
            or procgroup.carrying(envnames.EVENTS_DIR, str(path))):
        return None  # its workers are still ending (they follow their runner within seconds)
    return info


def finish_lost_run(path: Path, info: Mapping[str, Any]) -> dict[str, Any]:
    """End a run whose runner vanished: merge what the ranks wrote after the runner stopped
    reading into ``events.jsonl``, and write ``summary.json`` -- status ``failed``, reason
    ``runner_lost`` (``store_error`` when the runner noted that it ended on a full store),
    steady-state figures over the steps that completed.  Returns the summary
    (written when the store allows; in memory only when it does not)."""
    import fcntl

    from accelctl.contract.events import RunFailed, read_events
    from accelctl.run.summary import build_summary

    pid = str(info.get("runner", "")).partition(":")[0]
    ended = str(info.get("ended") or "")  # the runner ended, but could not write the summary
    with open(path / RUNNER_FILE, "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one reader finishes it; the others then read its summary
        done = read_json(path / SUMMARY_FILE)
        if done:
            return done
        events_path = path / EVENTS_FILE
        try:
            merged = {ln.strip() for ln in events_path.read_bytes().splitlines()} if events_path.exists() else set()
        except OSError:
            merged = set()
        late = [line.strip() for rank_file in sorted(path.glob("rank*.jsonl"))
                for line in rank_file.read_bytes().splitlines() if line.strip() and line.strip() not in merged]
        events = read_events(events_path) if events_path.exists() else []
        from accelctl.run.tail import parse_line

        events += [ev for ev in (parse_line(line)[1] for line in late) if ev is not None]
        steps = sum(1 for e in events if getattr(e, "kind", "") == "step" and getattr(e, "phase", "") == "measure"
                    and getattr(e, "rank", 0) == 0)
        failure = RunFailed(reason="store_error", message=ended) if ended else RunFailed(
            reason="runner_lost", message=(f"the runner (pid {pid}) ended without finishing the run (killed?); "
                                           f"partial summary over the {steps} measured steps that completed"))
        plan = Plan.from_dict(read_json(path / PLAN_FILE))
        started = float(info.get("started_unix_s") or path.stat().st_mtime)
        last = max([getattr(e, "time_unix_s", 0.0) for e in events] + [started])
        summary = build_summary(
            plan=plan, job=WorkerJob.from_dict(read_json(path / JOB_FILE)), run_id=path.name, events=events,
            stop_kind=None, failure=failure,
            launches=[{"name": ln.name, "argv": None, "cwd": None, "pid": None, "returncode": None, "wall_s": None}
                      for ln in plan.launches],
            started_unix_s=started, finished_unix_s=last)
        try:
            with open(events_path, "ab") as fh:
                fh.write(b"".join(line + b"\n" for line in late) + failure.to_json().encode() + b"\n")
            write_summary(path, summary)
        except OSError:
            pass  # a store we may not write: shown as lost all the same
        return summary


def read_run(path: Path) -> RunRecord:
    """A ``RunRecord`` for one run folder; tolerates a missing or broken ``summary.json``.
    A run whose runner vanished is finished here (``finish_lost_run``) and shows as
    ``failed (runner lost)``."""
    summary = read_json(path / SUMMARY_FILE)
    if not summary:
        lost = runner_gone(path)
        if lost is not None:
            try:
                summary = finish_lost_run(path, lost)
            except (OSError, ValueError, KeyError, TypeError):
                summary = {}  # unreadable inputs: stays incomplete
    info: Mapping[str, Any] = summary or read_json(path / PLAN_FILE) or read_json(path / JOB_FILE)
    m = _ID_RE.match(path.name)
    started = summary.get("started", "")
    if not started and m:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(m.group(1), "%Y%m%d-%H%M%S"))
    step, thr, unit = _headline(summary.get("stats") or {})
    return RunRecord(
        id=path.name,
        path=path,
        workload=str(info.get("workload", "")),
        target=str(info.get("target", "")),
        backend=str(info.get("backend", "")),
        status=_status(summary),
        started=started,
        median_step_time_s=step,
        throughput=thr,
        throughput_unit=unit,
        summary=summary,
    )


def _status(summary: Mapping[str, Any]) -> str:
    if not summary:
        return "incomplete"
    status = str(summary.get("status", "incomplete"))
    if status == "failed" and (summary.get("failure") or {}).get("reason") == "runner_lost":
        return "failed (runner lost)"
    return status


def list_runs(root: str | os.PathLike[str] | None = None) -> list[RunRecord]:
    """Every run folder under the store root, newest first."""
    base = runs_root(root)
    if not base.is_dir():
        return []
    records = [read_run(p) for p in base.iterdir() if p.is_dir() and _ID_RE.match(p.name)]

    def key(r: RunRecord) -> tuple[str, float]:
        return (r.id[:15], float(r.summary.get("started_unix_s") or r.path.stat().st_mtime))

    return sorted(records, key=key, reverse=True)


def load_run(id_or_path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> RunRecord:
    """A run by folder path, by full id, or by a unique id prefix (or suffix)."""
    path = Path(id_or_path)
    if path.is_dir():
        return read_run(path.absolute())
    base = runs_root(root)
    if (base / str(id_or_path)).is_dir():
        return read_run(base / str(id_or_path))
    name = str(id_or_path)
    hits = [p for p in base.iterdir() if p.is_dir() and (p.name.startswith(name) or p.name.endswith(name))] if base.is_dir() else []
    if len(hits) == 1:
        return read_run(hits[0])
    if not hits:
        raise RunStoreError(f"no run {name!r} under {base}")
    raise RunStoreError(f"run {name!r} is ambiguous under {base}: " + ", ".join(sorted(p.name for p in hits)[:5]))

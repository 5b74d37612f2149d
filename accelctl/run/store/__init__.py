"""The run store: one folder per run, holding its inputs, its events and its summary.

A run folder (under ``$ACCELCTL_RUNS_DIR`` or ``./runs``) holds ``workload.wl``, ``spec.json``,
``plan.json``, ``job.json`` (and ``jobs.json`` for a shared worker), the plan's generated files,
``worker.log``, each rank's ``rank<N>.jsonl``, the merged ``events.jsonl``, ``summary.json`` and,
where they apply, ``scheduler.json``, ``series.json`` and ``runner.json``.  Reading never blocks,
never trusts a file's shape (``accelctl.run.store.storefiles``) and never writes: a lost run's result is
computed on read, written only by the folder's next owner (``accelctl.run.store.lostrun.keep``).  Run ids
sort by time: ``<UTC yyyymmdd-HHMMSS>-<workload>-<target>-<4 hex>``.  No process is started or
signalled here, and nothing heavy is imported.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelctl.contract.ids import RUN_ID
from accelctl.analysis import throughput
from accelctl.contract import boundedfile, envnames, placeholders
from accelctl.contract import scheduler as scheduler_file
from accelctl.contract.scheduler import SchedulerJob
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import RUN_DIR, GeneratedFile, Plan
from accelctl.errors import RunError
from accelctl.frozen import replace
from accelctl.private_files import store_opener

if TYPE_CHECKING:  # the events of a lost run (``lost_run_result``), imported only to compute one
    from accelctl.contract.events import Event

RUNS_DIR_ENV = envnames.RUNS_DIR

WORKLOAD_FILE = "workload.wl"
SPEC_FILE = "spec.json"
PLAN_FILE = "plan.json"
JOB_FILE = "job.json"
LOG_FILE = "worker.log"
EVENTS_FILE = "events.jsonl"
SUMMARY_FILE = "summary.json"
SERIES_FILE = "series.json"
#: the status of a run whose folder or summary cannot be read: "unreadable: <reason>"
UNREADABLE = "unreadable"
RUNNER_FILE = "runner.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+|\.{2,}")
_ID_RE = RUN_ID


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
    import secrets  # here: hashlib, hmac, random -- ``estimate`` and ``runs`` only read the store

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{safe_name(workload)}-{safe_name(target)}-{secrets.token_hex(2)}"


def new_run_dir(workload: str, target: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Create and return a fresh, empty run folder with a unique, sortable id, writable by this
    user alone (``run --resume`` loads checkpoints only from such a folder)."""
    base = runs_root(root)
    if not base.is_dir():  # the store and what is missing above it: never writable by group or others
        make_folders(base)
    for _ in range(64):
        path = base / new_run_id(workload, target)
        try:
            path.mkdir()
        except FileExistsError:
            continue
        os.chmod(path, path.stat().st_mode & 0o755)  # never writable by group or others, whatever the umask
        return path
    raise RunStoreError(f"could not create a unique run folder under {base}")


def make_folders(path: Path) -> Path:
    """Make ``path`` and the folders missing above it, none writable by group or others whatever
    the umask (what ``mkdir -p`` makes takes the umask's mode: 0777 under a umask of 000)."""
    missing = [level for level in (path, *path.parents) if not os.path.lexists(level)]
    path.mkdir(parents=True, exist_ok=True)
    for level in missing:
        os.chmod(level, level.stat().st_mode & 0o755)
    return path


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
    ``run_values``, e.g. ``{free_port}``, with the value picked for this run), in one pass
    (``placeholders.fill``: a value naming another placeholder is not filled again)."""
    return placeholders.fill(text, {**(run_values or {}), RUN_DIR: str(run_dir)})


# --------------------------------------------------------------------------- writing


def _write(path: Path, text: str, executable: bool = False) -> Path:
    """Write ``path`` of a run folder (and the folders missing above it), never writable by group
    or others whatever the umask: ``run --resume`` runs what it holds."""
    make_folders(path.parent)
    _write_text(path, text)
    mode = stat.S_IMODE(path.stat().st_mode) & ~0o022  # a file there before: never others' to write either
    path.chmod(mode | 0o111 if executable else mode)
    return path


def _write_text(path: Path, text: str) -> None:
    """``text`` into ``path``, a new file made at most mode 0644 whatever the umask
    (``private_files.store_opener``)."""
    with open(path, "w", encoding="utf-8", opener=store_opener) as fh:
        fh.write(text)


def write_generated_files(run_dir: Path, files: Iterable[GeneratedFile],
                          run_values: Mapping[str, str] | None = None) -> list[Path]:
    """Write each generated file inside ``run_dir``, a template's ``{run_dir}`` substituted.

    Every path is checked before anything is written, so a plan with one escaping
    path writes nothing.
    """
    files = list(files)
    targets = [inside(run_dir, f.path) for f in files]
    return [_write(t, substitute(f.content, run_dir, run_values) if f.template else f.content, f.executable)
            for t, f in zip(targets, files)]


def job_for_run(job: WorkerJob, run_dir: Path, events_dir: Path | None = None) -> WorkerJob:
    """The job as this run's processes read it: ``run_id`` is the run folder's name and
    ``events_dir`` is filled in.  Nothing else is substituted: the job is data, never a
    template (``placeholders``), so a ``{run_dir}`` in a prompt stays as the user wrote it."""
    return replace(job, run_id=run_dir.name, events_dir=str(events_dir or run_dir))


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
        _write_text(tmp, text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_summary(run_dir: Path, summary: Mapping[str, Any]) -> Path:
    """Write ``summary.json`` atomically (a reader never sees half a summary), with the
    scheduler's job (``scheduler.json``: id, final state, exit code) under ``scheduler``
    when the run went through one."""
    job = scheduler_file.read(run_dir)
    if job is not None and "scheduler" not in summary:
        summary = {**summary, "scheduler": job.to_dict()}
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


def write_series(run_dir: Path, series_id: str, index: int, of: int) -> Path:
    """Mark ``run_dir`` as run ``index`` (1-based) of the ``of`` independent runs of one
    ``measure { repeat = N }`` series; ``series_id`` is the first run's id.  Written beside
    the summary as soon as the run starts, so a repeat that never finishes is still known
    to belong to its series (and ``compare`` can say the series is incomplete)."""
    path = run_dir / SERIES_FILE
    _write_text(path, json.dumps({"id": series_id, "index": index, "of": of}, sort_keys=True))
    return path


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class RunRecord:
    """One stored run, as listed by ``accelctl runs``."""

    id: str
    path: Path
    workload: str
    target: str
    backend: str
    #: ok, failed, stopped, "incomplete" (no summary.json: still running, or the runner
    #: itself was killed) or "unreadable: <reason>" (the folder or its summary cannot be
    #: read: permissions, a truncated or non-JSON summary, a summary that is not a file)
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
    #: the plan's engine (local, torchrun, slurm, ...; "" when unknown)
    engine: str = ""
    #: the scheduler's job behind the run (its last known state while it runs), or None
    scheduler: SchedulerJob | None = None
    #: why the run cannot be read ("" when it can): the reason in ``status``
    unreadable: str = ""
    #: series.json of a ``measure { repeat = N }`` run: {id, index, of} ({} for a lone run)
    series: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def median_step_s(self) -> float | None:
        """Alias of ``median_step_time_s`` (the name ``accelctl runs`` reads)."""
        return self.median_step_time_s

    @property
    def series_id(self) -> str:
        return str(self.series.get("id") or "")

    def events(self) -> list:
        """The run's merged events (``events.jsonl``), typed; [] when absent or unreadable."""
        return self.checked_events()[0]

    def checked_events(self) -> tuple[list, str]:
        """The run's merged events and why they cannot be read ("" when they can): a file that
        is not a regular one of bounded size, or a line that is not an event of its shape
        (a zero, negative, NaN or infinite step time among them: ``accelctl.run.store.storefiles``)."""
        from accelctl.run.store.storefiles import read_events

        return read_events(self.path / EVENTS_FILE)

    def plan(self) -> Plan | None:
        """The run's plan; None when ``plan.json`` is absent, unreadable or of another shape."""
        data = read_json(self.path / PLAN_FILE)
        try:
            return Plan.from_dict(data) if data else None
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            return None


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file without opening it ("" when it is missing,
    None when it is a regular file within its cap).  A FIFO is never opened: reading one blocks;
    a link is never followed (``accelctl.contract.boundedfile``)."""
    from accelctl.run.store.storefiles import EVENTS_CAP, FILE_CAPS, MAX_INT

    cap = FILE_CAPS.get(Path(path).name, EVENTS_CAP)
    return boundedfile.problem(path, MAX_INT if cap is None else cap)


def read_object(path: str | Path) -> tuple[dict[str, Any], str]:
    """A run file's JSON object and, when it cannot be had, why: ``({}, "")`` when the file
    is missing, ``({}, reason)`` when it is unreadable (permissions, not a regular file, too
    large, not UTF-8, truncated or not JSON, not an object).  ``summary.json``, ``runner.json``,
    ``series.json``, ``plan.json``, ``job.json`` and ``spec.json`` are also checked against their
    shapes (``accelctl.run.store.storefiles``)."""
    from accelctl.run.store import storefiles

    shape = {SUMMARY_FILE: storefiles.SUMMARY, RUNNER_FILE: storefiles.RUNNER, SERIES_FILE: storefiles.SERIES,
             PLAN_FILE: storefiles.PLAN, JOB_FILE: storefiles.JOB, SPEC_FILE: storefiles.SPEC}.get(Path(path).name)
    return storefiles.read_object(path, shape)


def read_json(path: str | Path) -> dict[str, Any]:
    """A run file's JSON object (``summary.json``, ``spec.json``, ``plan.json``...); ``{}``
    when it is missing, unreadable, not JSON, or not an object (a run being written, an
    interrupted one).  Every reader of run folders uses this one (or ``read_object``, which
    also says why)."""
    return read_object(path)[0]


def _headline(stats: Mapping[str, Any], task: str) -> tuple[float | None, float | None, str]:
    """(median step time, throughput, its unit): the throughput every surface shows
    (``accelctl.analysis.throughput``)."""
    value, unit = throughput.headline(stats, task)
    return (stats.get("step_time") or {}).get("median"), value, unit if value is not None else ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_files(path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], str,
                                    list[bytes] | None]:
    """What ``read_run`` reads of a run folder: (summary, series, plan, job, why it is unreadable
    or "", the rank lines a lost run's result appends to ``events.jsonl`` -- None unless the
    summary is a lost run's, computed here by ``lost_run_result``).  Writes nothing."""
    from accelctl.run.store import storefiles

    problem = storefiles.folder_problem(path)
    summary, why = ({}, "") if problem else read_object(path / SUMMARY_FILE)
    problem = problem or why
    inputs = []
    for name in (SERIES_FILE, PLAN_FILE, JOB_FILE, SPEC_FILE):  # each checked against its shape
        data, why = ({}, "") if problem else read_object(path / name)
        inputs.append(data)
        problem = problem or why
    series, plan, job, _ = inputs
    late = None
    if not summary and not problem:
        info, problem = read_object(path / RUNNER_FILE)
        if info and runner_gone(path, info):  # shown, never written here: ``lostrun.keep`` writes it
            # read again now that the runner is gone: it may have written its summary and
            # ended between the first read and this look (seen: an ``ok`` run shown lost)
            summary, problem = read_object(path / SUMMARY_FILE)
            if not summary and not problem:
                summary, late, problem = lost_run_result(path, info)
    return summary, series, plan, job, problem, late


def read_run(path: Path) -> RunRecord:
    """A ``RunRecord`` for one run folder; never raises on a broken one, never blocks, never
    waits for another reader: a missing summary is ``incomplete``, an unreadable folder or
    file ``unreadable: <reason>`` (``accelctl.run.store.storefiles``).  A run whose runner vanished
    shows as ``failed (runner lost)`` -- ``not started (runner lost)`` when its job never
    began -- computed here in memory; reading writes nothing (``accelctl.run.store.lostrun.keep``, taken
    by the folder's next owner, writes it)."""
    summary, series, plan, job, problem, _ = read_files(path)
    m = _ID_RE.match(path.name)
    # the run id names the workload and the target (safe names hold no "-")
    named = dict(zip(("workload", "target"), m.group(2).split("-", 1))) if m and "-" in m.group(2) else {}
    sources = [summary, plan, job, named]

    def fact(key: str) -> str:  # the first file that says it
        return next((str(src[key]) for src in sources if isinstance(src.get(key), str) and src[key]), "")

    started = str(summary.get("started") or "")
    if not started and m:
        try:
            started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(m.group(1), "%Y%m%d-%H%M%S"))
        except ValueError:  # a folder named like a run, with no real date in it
            started = ""
    step, thr, unit = _headline(summary.get("stats") or {}, str(summary.get("task") or ""))
    status = f"{UNREADABLE}: {problem}" if problem else _status(summary)
    return RunRecord(
        id=path.name,
        path=path,
        workload=fact("workload"),
        target=fact("target"),
        backend=fact("backend"),
        status=status,
        started=started,
        median_step_time_s=_number(step),
        throughput=_number(thr),
        throughput_unit=unit,
        summary=summary,
        engine=fact("engine"),
        scheduler=scheduler_file.from_dict(summary.get("scheduler")) or scheduler_file.read(path),
        unreadable=problem,
        series=series,
    )


def _status(summary: Mapping[str, Any]) -> str:
    if not summary:
        return "incomplete"
    status = str(summary.get("status", "incomplete"))
    lost = (summary.get("failure") or {}).get("reason") == "runner_lost"
    if status == "failed" and lost:
        return "failed (runner lost)"
    if status == "not_started":
        return "not started (runner lost)" if lost else "not started"
    return status


def is_run_id(name: str) -> bool:
    """``name`` has the shape of a run id (``<yyyymmdd-HHMMSS>-<workload>-<target>-<4 hex>``)."""
    return _ID_RE.match(name) is not None


def _run_dirs(base: Path) -> list[Path]:
    try:
        names = sorted(os.listdir(base))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise RunStoreError(f"cannot read the run store {base}: {getattr(exc, 'strerror', None) or exc}") from None
    return [base / n for n in names if _ID_RE.match(n) and _own_folder(base / n)]


def _own_folder(path: Path) -> bool:
    """``path`` is a folder itself, not a link to one (a link in the store named like a run
    would make a folder elsewhere read, and its processes signalled, as the store's run)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def list_runs(root: str | os.PathLike[str] | None = None) -> list[RunRecord]:
    """Every run folder under the store root, newest first (broken ones included, with
    their reason in ``status``)."""
    records = [read_run(p) for p in _run_dirs(runs_root(root))]

    def key(r: RunRecord) -> tuple[str, float]:
        when = _number(r.summary.get("started_unix_s"))
        if when is None:
            try:
                when = r.path.stat().st_mtime
            except OSError:
                when = 0.0
        return (r.id[:15], when)

    return sorted(records, key=key, reverse=True)


def series_runs(record: RunRecord, root: str | os.PathLike[str] | None = None) -> list[RunRecord]:
    """Every stored run of ``record``'s series (``series.json``), in repeat order; just
    ``[record]`` for a lone run.  The series' runs sit beside ``record`` in its store."""
    if not record.series_id:
        return [record]
    runs = [r for r in (read_run(p) for p in _run_dirs(record.path.parent)) if r.series_id == record.series_id]
    return sorted(runs, key=lambda r: (_number(r.series.get("index")) or 0, r.id)) or [record]


def load_run(id_or_path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> RunRecord:
    """A run of the store at ``root``: by full id, by a unique id prefix (or suffix), or by its
    folder's path; ``RunStoreError`` naming the store for anything else -- a folder outside it,
    or one in it that is no run folder, is no run (its files would be read, its processes
    signalled, as a run's)."""
    base = runs_root(root)
    name = os.fspath(id_or_path)
    if is_run_id(name) and _own_folder(base / name):
        return read_run(base / name)
    if os.sep in name or name in (".", "..") or (os.path.isdir(name) and not _run_dirs_named(base, name)):
        return read_run(_store_folder(name, base))
    hits = _run_dirs_named(base, name)
    if len(hits) == 1:
        return read_run(hits[0])
    if not hits:
        raise RunStoreError(f"no run {name!r} in the run store {base}")
    raise RunStoreError(f"run {name!r} is ambiguous in the run store {base}: " + ", ".join(sorted(p.name for p in hits)[:5]))


def _run_dirs_named(base: Path, name: str) -> list[Path]:
    return [p for p in _run_dirs(base) if name and (p.name.startswith(name) or p.name.endswith(name))]


def _store_folder(path: str, base: Path) -> Path:
    """``path`` as a run folder of the store at ``base`` (links resolved on both sides)."""
    try:
        real, store_real = Path(os.path.realpath(path)), Path(os.path.realpath(base))
    except (OSError, ValueError) as exc:
        raise RunStoreError(f"{path!r} is not a run of the run store {base} ({exc})") from None
    if real.parent != store_real or not is_run_id(real.name) or not real.is_dir():
        raise RunStoreError(f"{path} is not a run of the run store {base} (a RUN is a run id, a unique prefix or "
                            f"suffix of one, or a run folder in the store; --runs-dir names another store)")
    return store_real / real.name


# --------------------------------------------------------------------------- a lost run, on read


def runner_gone(path: Path, info: Mapping[str, Any]) -> bool:
    """``info`` (a checked ``runner.json``) names a runner of this machine and boot that is gone
    (or alive but not holding this folder's ``owner.lock``: not this run's), and no process of
    the run is left (its workers follow their runner within seconds).  A run
    recorded on another machine (a shared store) cannot be judged from here: not gone."""
    host = info.get("host") or {}
    here = _host()
    if host.get("name") != here["name"]:
        return False
    if host.get("boot_id") != here["boot_id"]:
        return True  # the machine rebooted since: nothing of the run can be running
    from accelctl.contract import supervision  # here: threading; ``estimate`` only reads runs_root()
    from accelctl.run.store import markers, ownership

    runner = str(info["runner"])
    parsed = supervision.parse(runner)
    if parsed is not None and supervision.alive(runner) and ownership.holds_open(parsed[0], path):
        return False  # its supervisor, alive and holding this folder's lock (a copy's runner holds none)
    return not markers.marked(path)  # its processes by their own mark, never by a recorded group


def _late_lines(path: Path, merged: set[bytes]) -> list[tuple[bytes, Event | None]]:
    """The ranks' lines that never reached ``events.jsonl`` (checked; ``Unreadable`` when a
    rank file cannot be read)."""
    from accelctl.run.store import storefiles

    late = []
    for rank_file in sorted(p for p in path.iterdir() if storefiles.RANK_FILE.match(p.name)):
        raw = boundedfile.read_regular(rank_file, storefiles.EVENTS_CAP) or b""
        late += [(line, ev) for line, ev in storefiles.event_lines(raw.split(b"\n"), rank_file.name)
                 if line not in merged]
    return late


def lost_run_result(path: Path, info: Mapping[str, Any]) -> tuple[dict[str, Any], list[bytes], str]:
    """A lost run's summary computed in memory from what its ranks wrote, the rank lines to append
    to ``events.jsonl`` (the failure's last), and why the run is unreadable instead ("": it is
    not).  Status ``failed``, reason ``runner_lost`` (``store_error`` when the runner noted that it
    ended on a full store), steady-state figures over the steps that completed; ``not_started``
    when the run's job never began.  Writes nothing: ``accelctl.run.store.lostrun.keep`` does."""
    from accelctl.contract.events import RunFailed
    from accelctl.run.store import storefiles
    from accelctl.run.store.summary import build_summary

    try:
        raw = boundedfile.read_regular(path / EVENTS_FILE, storefiles.EVENTS_CAP) or b""
        lines = [(line, ev) for line, ev in storefiles.event_lines(raw.split(b"\n"), EVENTS_FILE)]
        late = _late_lines(path, {line for line, _ in lines})
    except boundedfile.Unreadable as exc:
        return {}, [], exc.reason
    except OSError as exc:
        return {}, [], f"run folder: {exc.strerror or exc}"
    plan_data, why = storefiles.read_object(path / PLAN_FILE)
    job_data, why_job = storefiles.read_object(path / JOB_FILE)
    why = why or why_job
    if why or not plan_data or not job_data:
        return {}, [], why or f"{PLAN_FILE if not plan_data else JOB_FILE} is missing"
    try:
        plan, job = Plan.from_dict(plan_data), WorkerJob.from_dict(job_data)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        return {}, [], f"plan.json or job.json of an unexpected shape ({type(exc).__name__}: {str(exc)[:80]})"
    events = [ev for _, ev in lines + late if ev is not None]
    pid = str(info["runner"]).partition(":")[0]
    steps = sum(1 for e in events if getattr(e, "kind", "") == "step" and getattr(e, "phase", "") == "measure"
                and getattr(e, "rank", 0) == 0)
    began = bool(events)
    if info.get("ended"):  # the runner ended, but could not write the summary
        failure = RunFailed(reason="store_error", message=str(info["ended"]))
    elif began:
        failure = RunFailed(reason="runner_lost", message=(
            f"the runner (pid {pid}) ended without finishing the run (killed?); "
            f"partial summary over the {steps} measured steps that completed"))
    else:
        failure = RunFailed(reason="runner_lost", message=(
            f"the runner (pid {pid}) ended before this run's job started (killed?); nothing ran"))
    try:
        started = float(info.get("started_unix_s") or path.stat().st_mtime)
    except OSError as exc:
        return {}, [], f"run folder: {exc.strerror or exc}"
    last = max([getattr(e, "time_unix_s", 0.0) for e in events] + [started])
    try:
        summary = build_summary(
            plan=plan, job=job, run_id=path.name, events=events, stop_kind=None, failure=failure,
            launches=[{"name": ln.name, "argv": None, "cwd": None, "pid": None, "returncode": None, "wall_s": None}
                      for ln in plan.launches],
            started_unix_s=started, finished_unix_s=last)
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as exc:
        return {}, [], f"its events cannot be summarised ({type(exc).__name__}: {str(exc)[:80]})"
    if not began and not info.get("ended"):
        summary["status"] = "not_started"
    return summary, [line for line, _ in late] + [failure.to_json().encode()], ""

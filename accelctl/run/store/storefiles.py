"""The typed reader of a run folder's files: each file's shape is checked here, and only here.

A run folder is data a reader did not write (hand-edited, another version's, cut short, a FIFO or
a link in place of a file).  Every store reader goes through this module, which opens only bounded
regular files (``accelctl.contract.boundedfile``), checks each JSON file against its shape
(``SUMMARY``, ``RUNNER``, ``SERIES``; ``PLAN``/``JOB``/``SPEC`` from the contract's type hints) and
each event (``check_event``); a torn last line is skipped.  Nothing raises on bad data: a reader
gets ``(value, reason)``, ``reason`` "" when the file is missing or fine, and shows a run with a
reason as ``unreadable: <reason>``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from accelctl.contract import boundedfile
from accelctl.contract.boundedfile import Unreadable
from accelctl.contract.codec import MAX_INT, described
from accelctl.contract.events import PHASES, Event, event_from_dict
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Plan
from accelctl.frozen import Value
from accelctl.workload.types import WorkloadSpec

#: caps: a run's JSON records and workload file; its events (room for a long run's steps)
JSON_CAP = boundedfile.CAP_BYTES
EVENTS_CAP = 256 * 1024 * 1024
#: the files a run folder may hold, and their caps (``folder_problem`` looks at no others)
FILE_CAPS = {"workload.wl": JSON_CAP, "spec.json": JSON_CAP, "plan.json": JSON_CAP, "job.json": JSON_CAP,
             "jobs.json": JSON_CAP, "summary.json": JSON_CAP, "scheduler.json": JSON_CAP, "series.json": JSON_CAP,
             "runner.json": JSON_CAP, "events.jsonl": EVENTS_CAP, "worker.log": None}
RANK_FILE = re.compile(r"^rank\d+\.jsonl$")


class BadShape(ValueError):
    """A value of the wrong shape; the message names the field."""


Check = Callable[[Any, str], None]


def _fail(where: str, what: str, value: Any) -> BadShape:
    return BadShape(f"{where} must be {what} (got {described(value)})")


def text(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise _fail(where, "a string", value)


def boolean(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise _fail(where, "true or false", value)


def integer(lo: int = 0, hi: int = MAX_INT) -> Check:
    what = ("an integer" if lo == -MAX_INT and hi == MAX_INT else f"an integer of at least {lo}" if hi == MAX_INT
            else f"an integer from {lo} to {hi}")

    def check(value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise _fail(where, what, value)
    return check


def one_of(*values: str) -> Check:
    def check(value: Any, where: str) -> None:
        if value not in values:
            raise _fail(where, "one of " + ", ".join(values), value)
    return check


def number(*, positive: bool = False, nan: bool = False) -> Check:
    """A finite number, at least 0 (above 0 when ``positive``); NaN too when ``nan`` (a loss)."""
    what = "a finite number above 0" if positive else "a finite number of at least 0"

    def check(value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(where, what, value)
        if isinstance(value, float) and math.isnan(value):
            if nan:
                return
            raise _fail(where, what, value)
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise _fail(where, what, value)
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise _fail(where, what, value)
    return check


def signed(value: Any, where: str) -> None:
    """Any finite number (a loss may be negative), or NaN (a failed step's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isinf(value) or (
            isinstance(value, int) and abs(value) > MAX_INT):
        raise _fail(where, "a number", value)


def anything(value: Any, where: str) -> None:
    pass


def obj(fields: Mapping[str, Check], required: tuple[str, ...] = ()) -> Check:
    """An object whose listed fields, where present and not null, pass their checks (the
    ``required`` ones must be present and not null); other keys are free (a newer version's)."""
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _fail(where, "an object", value)
        for key in required:
            if value.get(key) is None:
                raise BadShape(f"{where}.{key} is missing" if where else f"{key} is missing")
        for key, sub in fields.items():
            if value.get(key) is not None:
                sub(value[key], f"{where}.{key}" if where else key)
    return check


def list_of(item: Check) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise _fail(where, "a list", value)
        for i, v in enumerate(value):
            item(v, f"{where}[{i}]")
    return check


def mapping_of(item: Check) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _fail(where, "an object", value)
        for k, v in value.items():
            item(v, f"{where}.{k}")
    return check


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_hint(tp: Any, value: Any, where: str) -> None:
    """``value`` as a JSON round trip of a field typed ``tp`` gives it back (``codec``)."""
    origin = typing.get_origin(tp)
    if tp is Any or tp is object:
        return
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(arms) < len(typing.get_args(tp)):
            return
        problems = []
        for arm in arms:
            try:
                return _check_hint(arm, value, where)
            except BadShape as exc:
                problems.append(exc)
        raise problems[0]
    if isinstance(tp, type) and issubclass(tp, Value):
        if not isinstance(value, dict):
            raise _fail(where, "an object", value)
        hints = _hints(tp)
        for key, sub in value.items():  # unknown keys: another version's (``codec`` refuses them)
            if key in hints:
                _check_hint(hints[key], sub, f"{where}.{key}" if where else key)
    elif tp is bool:
        boolean(value, where)
    elif tp is int:
        integer(-MAX_INT)(value, where)
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
                isinstance(value, int) and abs(value) > MAX_INT):
            raise _fail(where, "a finite number", value)
    elif tp is str:
        text(value, where)
    elif origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise _fail(where, "one of " + ", ".join(map(str, typing.get_args(tp))), value)
    elif origin in (tuple, list) or tp in (tuple, list):
        if not isinstance(value, list):
            raise _fail(where, "a list", value)
        inner = (typing.get_args(tp) or (Any,))[0]
        for i, v in enumerate(value):
            _check_hint(inner, v, f"{where}[{i}]")
    elif origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise _fail(where, "an object", value)
        inner = (typing.get_args(tp) or (str, Any))[1]
        for k, v in value.items():
            _check_hint(inner, v, f"{where}.{k}")


def typed(cls: type) -> Check:
    """The shape of a contract dataclass's JSON form (``plan.json``: ``Plan``; ``job.json``:
    ``WorkerJob``; ``spec.json``: ``WorkloadSpec``), from its type hints: every known field of
    its type, recursively; keys another version added are left to ``codec`` (which refuses them
    where the file is rebuilt)."""
    def check(value: Any, where: str) -> None:
        _check_hint(cls, value, where)
    return check


_TIME = number(positive=True)
_NONNEG = number()
_COUNT = integer(0)
_DISTRIBUTION = obj({"count": _COUNT, "max": _TIME, "mean": _TIME, "median": _TIME, "min": _TIME, "p90": _TIME,
                     "p99": _TIME, "stdev": _NONNEG})
_RATE = obj({"median": _NONNEG, "mean": _NONNEG, "aggregate": _NONNEG})
_INTERVAL = obj({"low": signed, "high": signed, "mean": signed, "confidence": _NONNEG, "n": _COUNT})
STATS = obj({
    "ranks": _COUNT, "step_time": _DISTRIBUTION, "per_rank": mapping_of(_DISTRIBUTION),
    "throughput": obj({"samples_per_s": _RATE, "tokens_per_s": _RATE}),
    "repeat_means_s": list_of(_TIME), "mean_of_repeats_s": _TIME, "warmup_steps": _COUNT, "warmup_time_s": _NONNEG,
    "other_steps": _COUNT,
    "generation": obj({k: _TIME for k in ("latency_mean_s", "latency_median_s", "latency_p90_s", "latency_p99_s")}
                      | {k: _NONNEG for k in ("ttft_mean_s", "ttft_median_s", "per_token_mean_s", "per_token_median_s",
                                              "tokens_per_s_median", "tokens_per_s_mean", "latency_stdev_s")}),
    "loss": obj({"first": signed, "last": signed, "k": _COUNT, "first_k_mean": signed, "last_k_mean": signed,
                 "decreased": boolean}),
    "percentile_method": text, "mfu": _RATE, "peak_mem_bytes": _COUNT,
    "repeats": obj({"n": _COUNT, "mean": _TIME, "kept": list_of(_TIME), "dropped": list_of(_TIME), "method": text,
                    "ci": _INTERVAL}),
    "step_time_ci": _INTERVAL,
})
FAILURE = obj({"reason": text, "message": text, "rank": integer(0), "step": integer(0)}, required=("reason",))
SCHEDULER = obj({"scheduler": text, "job_id": text, "state": text, "exit_code": integer(-MAX_INT), "ref": text,
                 "handle": text, "app_state": text})
#: a summary's statuses (``not_started``: a run whose runner was lost before its job began)
STATUSES = ("ok", "failed", "stopped", "not_started")
#: ``summary.json`` (``accelctl.run.store.summary.build_summary``): what the store and its readers use
SUMMARY = obj({
    "status": one_of(*STATUSES), "run_id": text, "workload": text, "target": text, "backend": text, "engine": text,
    "device": text, "task": text, "started": text, "started_unix_s": _NONNEG, "finished_unix_s": _NONNEG,
    "timings": mapping_of(_NONNEG), "measure": obj({"warmup": _COUNT, "steps": _COUNT, "repeat": _COUNT}),
    "world_size": _COUNT, "stats": STATS, "env": obj({}), "details": obj({}),
    "what_ran": obj({"model": obj({"params": _NONNEG, "scale": text}), "data": obj({}),
                     "rehearsal": obj({"of": text, "on": text})}),
    "results": obj({}), "failure": FAILURE, "stopped_by": text, "warnings": list_of(text),
    "launches": list_of(obj({"name": text})), "returncodes": list_of(anything),
    "resumed": list_of(obj({"step": _COUNT, "path": text}, required=("step",))), "tracking": obj({}),
    "scheduler": SCHEDULER, "schema_version": _COUNT,
}, required=("status",))
#: ``runner.json`` (``store.write_runner``): who supervises the run, where, its process groups
RUNNER = obj({"runner": text, "host": obj({"name": text, "boot_id": text}), "started_unix_s": _NONNEG,
              "pgids": list_of(integer(1, 2**31 - 1)), "ended": text}, required=("runner",))
#: ``series.json`` (``store.write_series``)
SERIES = obj({"id": text, "index": integer(1), "of": integer(1)}, required=("id",))


PLAN = typed(Plan)
JOB = typed(WorkerJob)
SPEC = typed(WorkloadSpec)


def _strict_constant(name: str) -> float:
    return float(name)  # NaN, Infinity, -Infinity: allowed by the parser, judged by the shapes


def parse_object(raw: bytes, name: str) -> dict[str, Any]:
    """A JSON object from a file's bytes; ``Unreadable`` naming ``name`` and why not."""
    if not raw.strip():
        raise Unreadable(f"{name} is empty")
    try:
        text_ = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{name} is not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text_, parse_constant=_strict_constant)
    except json.JSONDecodeError as exc:
        # the text ends inside a value: a writer stopped half-way (or a disk filled up)
        cut = exc.pos >= len(text_.rstrip()) or exc.msg.startswith("Unterminated string")
        raise Unreadable(f"{name} is {'truncated' if cut else 'not JSON'} ({exc.msg}: line {exc.lineno} "
                         f"column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # an integer too long to convert, nesting too deep
        raise Unreadable(f"{name} is not JSON ({str(exc)[:80] or type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise Unreadable(f"{name} is not a JSON object")
    return data


def read_object(path: str | os.PathLike[str], shape: Check | None = None,
                cap: int = JSON_CAP) -> tuple[dict[str, Any], str]:
    """A run file's JSON object and, when it cannot be had, why: ``({}, "")`` when the file
    is missing, ``({}, reason)`` when it is unreadable (not a regular file, too large, not UTF-8,
    truncated or not JSON, not an object, not of ``shape``)."""
    path = Path(path)
    try:
        raw = boundedfile.read_regular(path, cap)
        if raw is None:
            return {}, ""
        data = parse_object(raw, path.name)
        if shape is not None:
            shape(data, "")
    except Unreadable as exc:
        return {}, exc.reason
    except BadShape as exc:
        return {}, f"{path.name}: {exc}"
    return data, ""


# --------------------------------------------------------------------------- events

_RANK = integer(0)
_STAMP = number()
_OPT_NONNEG = number()
EVENT_FIELDS: dict[str, Check] = {
    "run_started": obj({"run_id": text, "workload": text, "target": text, "backend": text, "rank": _RANK,
                        "world_size": integer(1), "env": obj({}), "details": obj({}), "time_unix_s": _STAMP}),
    "phase": obj({"phase": text, "rank": _RANK, "repeat": _COUNT, "time_unix_s": _STAMP}, required=("phase",)),
    "step": obj({"step": _COUNT, "phase": text, "step_time_s": _TIME, "rank": _RANK, "repeat": _COUNT,
                 "loss": signed, "samples": _COUNT, "tokens": _COUNT, "samples_per_s": _OPT_NONNEG,
                 "tokens_per_s": _OPT_NONNEG, "mfu": _OPT_NONNEG, "mem_bytes": _COUNT, "new_tokens": _COUNT,
                 "ttft_s": _OPT_NONNEG, "per_token_s": _OPT_NONNEG, "time_unix_s": _STAMP},
                required=("step", "phase", "step_time_s")),
    "log": obj({"level": text, "message": text, "rank": _RANK, "time_unix_s": _STAMP}, required=("level", "message")),
    "run_finished": obj({"rank": _RANK, "steps": _COUNT, "wall_s": _NONNEG, "results": obj({}), "time_unix_s": _STAMP}),
    "run_failed": obj({"reason": text, "message": text, "rank": _RANK, "step": _COUNT, "traceback": text,
                       "time_unix_s": _STAMP}, required=("reason", "message")),
    "checkpoint_saved": obj({"step": _COUNT, "path": text, "rank": _RANK, "size_bytes": _COUNT, "save_s": _NONNEG,
                             "time_unix_s": _STAMP}, required=("step", "path")),
    "run_resumed": obj({"step": _COUNT, "path": text, "rank": _RANK, "load_s": _NONNEG, "time_unix_s": _STAMP},
                       required=("step", "path")),
}


def check_event(data: Any) -> Event | None:
    """The event of one parsed line; None for an object of a kind this version does not know
    (kept, given to no one); ``BadShape`` for a known kind of the wrong shape."""
    if not isinstance(data, dict):
        raise BadShape(f"an event must be an object (got {described(data)})")
    kind = data.get("kind")
    check = EVENT_FIELDS.get(kind) if isinstance(kind, str) else None
    if check is None:
        return None
    check(data, kind)
    if kind in ("phase", "step") and data["phase"] not in PHASES:
        raise BadShape(f"{kind}.phase must be one of {', '.join(PHASES)} (got {data['phase']!r:.40})")
    return event_from_dict(data)


def event_lines(lines: list[bytes], name: str, first: int = 1) -> list[tuple[bytes, Event | None]]:
    """Each non-blank line of a JSONL events file with its event (None: a kind this version
    does not know); a torn LAST line (a killed writer) is left out, any other line that is not
    an event of its shape is ``Unreadable``, naming the line (numbered from ``first``)."""
    out: list[tuple[bytes, Event | None]] = []
    filled = [i for i, line in enumerate(lines) if line.strip()]
    for i in filled:
        line = lines[i].strip()
        try:
            data = json.loads(line.decode("utf-8"), parse_constant=_strict_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            if i == filled[-1]:
                continue
            raise Unreadable(f"{name} line {first + i} is not JSON ({type(exc).__name__})") from None
        try:
            event = check_event(data)
        except BadShape as exc:
            raise Unreadable(f"{name} line {first + i}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise Unreadable(f"{name} line {first + i} is not an event ({exc})") from None
        out.append((line, event))
    return out


def parse_events(raw: bytes, name: str) -> list[Event]:
    """The events of a JSONL file's bytes (``event_lines``)."""
    return [ev for _, ev in event_lines(raw.split(b"\n"), name) if ev is not None]


def read_events(path: str | os.PathLike[str], cap: int = EVENTS_CAP) -> tuple[list[Event], str]:
    """A JSONL events file's events and why it is unreadable ("" when it is fine or missing)."""
    path = Path(path)
    try:
        raw = boundedfile.read_regular(path, cap)
        return ([] if raw is None else parse_events(raw, path.name)), ""
    except Unreadable as exc:
        return [], exc.reason


def read_text(path: str | os.PathLike[str], cap: int = JSON_CAP) -> tuple[str | None, str]:
    """A text file (``workload.wl``): its text (None when missing) and why it is unreadable."""
    path = Path(path)
    try:
        raw = boundedfile.read_regular(path, cap)
        return (None if raw is None else raw.decode("utf-8")), ""
    except Unreadable as exc:
        return None, exc.reason
    except UnicodeDecodeError as exc:
        return None, f"{path.name} is not UTF-8 text (byte {exc.start})"


def folder_problem(run_dir: Path) -> str:
    """Why a run folder cannot be read ("" when it can), found without opening a file: the
    folder itself cannot be listed, or one of its files (``FILE_CAPS``, ``rank<N>.jsonl``) is a
    link, a FIFO, a directory, a device or larger than its cap."""
    try:
        names = sorted(os.listdir(run_dir))
    except OSError as exc:
        return f"run folder: {exc.strerror or exc}"
    for name in names:
        if name in FILE_CAPS or RANK_FILE.match(name):
            cap = FILE_CAPS.get(name, EVENTS_CAP)
            why = boundedfile.problem(run_dir / name, MAX_INT if cap is None else cap)
            if why:
                return why
    return ""

"""What a run's supervisor is given: the runs a face has checked and planned, as data.

``accelctl run`` (or the TUI) reads, checks and plans a workload file once; the supervisor it
starts (``accelctl.entrypoints.SUPERVISOR``) is handed the result -- each plan, the settings and
the source it was made from, why that target, how many repeats, the launches started here -- and
runs it without parsing the workload again.  It is handed over on the supervisor's stdin, not at
a path: nothing another user could write is ever taken for a plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from accelctl.contract.plan import Plan

#: the batch format; a supervisor refuses any other (a face and a supervisor of two accelctls)
VERSION = 1


@dataclass(frozen=True)
class Request:
    """What a face asks of a run, beside the workloads: ``only`` the launches started here
    (``--launch``; None: all), ``preflight`` first (``--preflight``)."""

    target: str | None = None
    engine: str | None = None
    rehearse: bool = False
    fp8: bool = False
    runs_dir: str | Path | None = None
    only: tuple[str, ...] | None = None
    preflight: bool = False
    preflight_timeout: float = 300.0


@dataclass(frozen=True)
class Planned:
    """One workload as its supervisor runs it: its name, its plan (one process of a repeat
    series), the settings it was checked with (``WorkloadSpec.to_json``, stored in its run
    folder), why that target, N of ``measure { repeat = N }`` and the world its preflight must
    form (0: a rehearsal, whatever the stand-in forms)."""

    name: str
    plan: Plan
    spec_json: str
    why: str
    repeats: int
    world: int


@dataclass(frozen=True)
class Batch:
    """The runs of one ``accelctl run``: the workloads in order, the source they were checked
    from (with ``--set`` written in), the request, ``run --json``'s document wanted; or
    ``resume``, a stored run to go on with its own plan (``resume_file``: the workload file it
    must still match)."""

    planned: tuple[Planned, ...] = ()
    source: str | None = None
    request: Request = Request()
    json: bool = False
    resume: str | None = None
    resume_file: str | None = None


class BatchError(ValueError):
    """A supervisor's input that is not a batch this accelctl wrote."""


def encode(batch: Batch) -> bytes:
    req = {f.name: getattr(batch.request, f.name) for f in fields(Request)}
    req["runs_dir"] = None if req["runs_dir"] is None else str(req["runs_dir"])
    req["only"] = None if req["only"] is None else list(req["only"])
    doc = {"version": VERSION, "source": batch.source, "request": req, "json": batch.json,
           "resume": batch.resume, "resume_file": batch.resume_file,
           "planned": [{"name": p.name, "plan": p.plan.to_dict(), "spec_json": p.spec_json, "why": p.why,
                        "repeats": p.repeats, "world": p.world} for p in batch.planned]}
    return json.dumps(doc, allow_nan=False).encode("utf-8")


def _typed(d: dict[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    value = d.get(key)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise BatchError(f"{where}{key}: {type(value).__name__} is not {' or '.join(k.__name__ for k in kinds)}")
    return value


def decode(data: bytes) -> Batch:
    """The batch ``encode`` wrote; ``BatchError`` saying what is wrong with anything else."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BatchError(f"not a batch: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise BatchError(f"not a batch of version {VERSION}")
    none = type(None)
    r = _typed(doc, "request", (dict,), "")
    only = _typed(r, "only", (list, none), "request.")
    if only is not None and not all(isinstance(o, str) for o in only):
        raise BatchError("request.only: not a list of launch names")
    request = Request(target=_typed(r, "target", (str, none), "request."),
                      engine=_typed(r, "engine", (str, none), "request."),
                      rehearse=_typed(r, "rehearse", (bool,), "request."), fp8=_typed(r, "fp8", (bool,), "request."),
                      runs_dir=_typed(r, "runs_dir", (str, none), "request."),
                      only=None if only is None else tuple(only),
                      preflight=_typed(r, "preflight", (bool,), "request."),
                      preflight_timeout=float(_typed(r, "preflight_timeout", (int, float), "request.")))
    planned = []
    for i, p in enumerate(_typed(doc, "planned", (list,), "")):
        where = f"planned[{i}]."
        if not isinstance(p, dict):
            raise BatchError(f"planned[{i}]: not an object")
        try:
            plan = Plan.from_dict(_typed(p, "plan", (dict,), where))
        except (KeyError, TypeError, ValueError) as exc:
            raise BatchError(f"{where}plan: {type(exc).__name__}: {exc}") from None
        planned.append(Planned(_typed(p, "name", (str,), where), plan, _typed(p, "spec_json", (str,), where),
                               _typed(p, "why", (str,), where), _typed(p, "repeats", (int,), where),
                               _typed(p, "world", (int,), where)))
    return Batch(tuple(planned), _typed(doc, "source", (str, none), ""), request, _typed(doc, "json", (bool,), ""),
                 _typed(doc, "resume", (str, none), ""), _typed(doc, "resume_file", (str, none), ""))

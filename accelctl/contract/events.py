"""Typed run events: what a worker reports and what every sink consumes.

Events are frozen dataclasses that serialise to one JSON object per line
(``events.jsonl``).  Keys carry their units (``step_time_s``, ``mem_bytes``) so a
reader never has to guess.  ``event_from_dict`` is the inverse of ``to_dict``.

This module imports nothing heavy: the runner, the TUI and the reports read
events without torch.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

#: Phases of a run, in order.  Only ``measure`` steps enter steady-state figures.
PHASES = ("setup", "compile", "warmup", "measure", "done")


@dataclass(frozen=True)
class Event:
    """Base of every event; ``kind`` names the concrete type in JSON."""

    kind: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind}
        d.update(dataclasses.asdict(self))
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=True)


@dataclass(frozen=True)
class RunStarted(Event):
    """The worker is alive and knows what it will run."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    workload: str
    target: str
    backend: str
    rank: int = 0
    world_size: int = 1
    #: versions of python, torch and libraries, CPU model, threads, device name
    env: dict[str, Any] = field(default_factory=dict)
    #: what the worker resolved: model family, parameter count, stand-in or real weights...
    details: dict[str, Any] = field(default_factory=dict)
    time_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class PhaseChanged(Event):
    """Entering a phase (``setup``, ``compile``, ``warmup``, ``measure``, ``done``)."""

    kind: ClassVar[str] = "phase"
    phase: str
    rank: int = 0
    repeat: int = 0
    time_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class StepMetrics(Event):
    """One optimizer step (training) or one generate/forward call (inference).

    Fields that do not apply to a task stay ``None`` (``loss`` for generation,
    ``new_tokens`` for training).
    """

    kind: ClassVar[str] = "step"
    step: int
    phase: str
    step_time_s: float
    rank: int = 0
    repeat: int = 0
    loss: float | None = None
    samples: int = 0
    tokens: int = 0
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    #: model FLOPs utilisation against the device's peak (measured peak on CPU)
    mfu: float | None = None
    #: resident memory of the process (CPU) or peak allocated device memory
    mem_bytes: int | None = None
    #: generation only: tokens produced, time to first token, mean per-token latency
    new_tokens: int | None = None
    ttft_s: float | None = None
    per_token_s: float | None = None
    time_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class LogMessage(Event):
    """A human message from the worker or runner (warnings included)."""

    kind: ClassVar[str] = "log"
    level: str
    message: str
    rank: int = 0
    time_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunFinished(Event):
    """A rank finished its loop normally."""

    kind: ClassVar[str] = "run_finished"
    rank: int = 0
    steps: int = 0
    wall_s: float = 0.0
    #: task-specific results (e.g. the generated token ids' count, final loss)
    results: dict[str, Any] = field(default_factory=dict)
    time_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunFailed(Event):
    """A rank (or the runner on its behalf) gave up.

    ``reason`` is a short machine code: ``nan_loss``, ``exception``, ``crashed``,
    ``stopped``, ``timeout``, ``disk_full`` (a checkpoint save met a full disk).
    """

    kind: ClassVar[str] = "run_failed"
    reason: str
    message: str
    rank: int = 0
    step: int | None = None
    traceback: str = ""
    time_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class CheckpointSaved(Event):
    """A complete checkpoint after optimizer step ``step`` (every rank's part written and
    synced; emitted by rank 0 once the checkpoint is marked complete)."""

    kind: ClassVar[str] = "checkpoint_saved"
    step: int
    #: the checkpoint's folder
    path: str
    rank: int = 0
    #: bytes of the checkpoint's files, and seconds the save took (outside the step times)
    size_bytes: int = 0
    save_s: float = 0.0
    time_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunResumed(Event):
    """A rank loaded the checkpoint of step ``step`` and continues at ``step + 1``."""

    kind: ClassVar[str] = "run_resumed"
    step: int
    path: str
    rank: int = 0
    load_s: float = 0.0
    time_unix_s: float = field(default_factory=time.time)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls for cls in (RunStarted, PhaseChanged, StepMetrics, LogMessage, RunFinished, RunFailed,
                              CheckpointSaved, RunResumed)
}


def event_from_dict(d: dict[str, Any]) -> Event:
    """Rebuild an event from its JSON form; unknown keys are ignored (forward compatible)."""
    cls = EVENT_TYPES.get(d.get("kind", ""))
    if cls is None:
        raise ValueError(f"unknown event kind {d.get('kind')!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


def read_events(path) -> list[Event]:
    """Read an ``events.jsonl`` file; a torn last line (a killed writer) is skipped."""
    out: list[Event] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(event_from_dict(json.loads(line)))
            except (json.JSONDecodeError, ValueError, TypeError):
                continue
    return out

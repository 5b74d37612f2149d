"""TensorBoard export of a run, framed by TensorBoard's own writer.

``RecordWriter`` (``tensorboard.summary.writer``: the TFRecord framing and CRC32C that
``EventFileWriter``, the writer torch's ``SummaryWriter`` wraps, writes through), the
``brain.Event:2`` header ``EventFileWriter`` starts a file with, and the ``Event``/``Summary``
protocol buffers of ``tensorboard.compat.proto``; neither TensorFlow nor torch is imported.
Each scalar is a ``simple_value`` (what ``SummaryWriter.add_scalar`` writes), so TensorBoard's
scalar dashboard and ``EventAccumulator.Scalars`` read it.  Written here, in this thread:
``EventFileWriter`` writes from a thread of its own, whose failure (a full disk) is a traceback
of that thread and an event file cut short.

Written as the runner's live logging writes it (``accelctl.run.tracking.writers``): the
HPARAMS plugin's experiment and session (every hyperparameter, ``tracking.run_params``), then
per step of rank 0 (x = the step number, wall time = the event's) the ``train/*`` (``eval/*``,
``gen/*``) scalars of ``accelctl.analysis.scalars``, then the headline figures
(``summary/*``) at the last step and the session's end.

The file is written into a temporary folder beside the run's, synced and renamed into place,
the runs of one export all written before any is placed: an export that fails (an
``OSError``: the disk filled on its third run) leaves nothing, and an earlier export of each
run stays as it was.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from accelctl.analysis.scalars import run_scalars
from accelctl.report.exportpath import remove
from accelctl.report.tracking import run_params, step_rows
from accelctl.run.tracking import writers

__all__ = ["EVENT_FILE_PREFIX", "export_run", "export_runs", "run_scalars"]

#: how TensorBoard names event files (the writer adds time, host, pid and a counter)
EVENT_FILE_PREFIX = "events.out.tfevents."


class _Events:
    """``add_event`` (what ``writers.tb_*`` call) onto TensorBoard's ``RecordWriter``."""

    def __init__(self, file: Any) -> None:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        self._records = RecordWriter(file)
        self.add_event(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2",
                                       source_metadata=event_pb2.SourceMetadata(writer="accelctl report")))

    def add_event(self, event: Any) -> None:
        self._records.write(event.SerializeToString())


def export_run(record_: Any, out_dir: str | Path) -> Path:
    """Write ``<out_dir>/<run id>/events.out.tfevents.*`` for a stored run; an earlier
    export of the same run in that folder is replaced (one event file per run)."""
    return export_runs([record_], out_dir)[0]


def export_runs(records: list, out_dir: str | Path) -> list[Path]:
    """``export_run`` of each of ``records``, all of them or none: every event file is written
    (into a temporary folder of its own) before any is put in place, and an ``OSError`` on the
    way removes what this call put there, each earlier export as it was."""
    records = list({r.id: r for r in records}.values())
    written: list[tuple[Any, Path, str]] = []
    try:
        for r in records:
            written.append((r, *_write(r, Path(out_dir))))
        return _place_all([(tmp, name, Path(out_dir) / r.id) for r, tmp, name in written])
    finally:
        for _, tmp, _ in written:
            shutil.rmtree(tmp, ignore_errors=True)


def _write(record_: Any, out_dir: Path) -> tuple[Path, str]:
    """The run's event file written and synced in a new temporary folder in ``out_dir``:
    (that folder, the file's name)."""
    rows = step_rows(record_)
    summary = {**record_.summary, "status": record_.status}
    started = float(summary.get("started_unix_s") or (rows[0][1] if rows else 0.0))
    name = f"{EVENT_FILE_PREFIX}{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.0"
    tmp = Path(tempfile.mkdtemp(prefix=f".{record_.id}.", suffix=".partial", dir=out_dir))
    try:
        with open(tmp / name, "wb") as file:
            events = _Events(file)
            writers.tb_hparams(events, run_params(record_), started)
            for step, wall, values in rows:
                writers.tb_scalars(events, step, wall, values)
            writers.tb_finish(events, summary, *((rows[-1][0], rows[-1][1]) if rows else (0, started)))
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp, name


def _place_all(files: list[tuple[Path, str, Path]]) -> list[Path]:
    """Each written ``tmp/name`` in ``folder``: the whole folder renamed into place where there
    is none yet, else the file moved in (its counter raised past a name taken there); once all
    are there, the runs' earlier event files removed.  A failure on the way takes back what was
    placed.  Returns the event files."""
    placed: list[Path] = []  # a run folder renamed into place, or a file moved into an earlier one
    events: list[Path] = []
    try:
        for tmp, name, folder in files:
            if not os.path.lexists(folder):
                os.rename(tmp, folder)
                placed.append(folder)
                events.append(folder / name)
                continue
            stem, n, target = name.rsplit(".", 1)[0], 0, folder / name
            while os.path.lexists(target):
                n += 1
                target = folder / f"{stem}.{n}"
            os.rename(tmp / name, target)
            placed.append(target)
            events.append(target)
    except BaseException:
        for p in reversed(placed):
            remove(p)
        raise
    for event in events:
        for old in event.parent.glob(EVENT_FILE_PREFIX + "*"):
            if old != event:
                old.unlink()
    return events

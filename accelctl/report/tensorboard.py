"""TensorBoard export of a run, written by TensorBoard's own writer.

``EventFileWriter`` (``tensorboard.summary.writer``: the TFRecord framing, CRC32C and the
``brain.Event:2`` header, the writer torch's ``SummaryWriter`` wraps) with the
``Event``/``Summary`` protocol buffers of ``tensorboard.compat.proto``; neither TensorFlow
nor torch is imported.  Each scalar is a ``simple_value`` (what ``SummaryWriter.add_scalar``
writes), so TensorBoard's scalar dashboard and ``EventAccumulator.Scalars`` read it.

Written as the runner's live logging writes it (``accelctl.run.tracking.writers``): the
HPARAMS plugin's experiment and session (every hyperparameter, ``tracking.run_params``), then
per step of rank 0 (x = the step number, wall time = the event's) the ``train/*`` (``eval/*``,
``gen/*``) scalars of ``accelctl.analysis.scalars``, then the headline figures
(``summary/*``) at the last step and the session's end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelctl.analysis.scalars import run_scalars
from accelctl.report.tracking import run_params, step_rows
from accelctl.run.tracking import writers

__all__ = ["EVENT_FILE_PREFIX", "export_run", "run_scalars"]

#: how TensorBoard names event files (the writer adds time, host, pid and a counter)
EVENT_FILE_PREFIX = "events.out.tfevents."


def export_run(record_: Any, out_dir: str | Path) -> Path:
    """Write ``<out_dir>/<run id>/events.out.tfevents.*`` for a stored run; an earlier
    export of the same run in that folder is replaced (one event file per run)."""
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    rows = step_rows(record_)
    folder = Path(out_dir) / record_.id
    for old in folder.glob(EVENT_FILE_PREFIX + "*"):
        old.unlink()
    summary = {**record_.summary, "status": record_.status}
    started = float(summary.get("started_unix_s") or (rows[0][1] if rows else 0.0))
    writer = EventFileWriter(str(folder))
    try:
        writers.tb_hparams(writer, run_params(record_), started)
        for step, wall, values in rows:
            writers.tb_scalars(writer, step, wall, values)
        writers.tb_finish(writer, summary, *((rows[-1][0], rows[-1][1]) if rows else (0, started)))
    finally:
        writer.close()
    (path,) = folder.glob(EVENT_FILE_PREFIX + "*")
    return path

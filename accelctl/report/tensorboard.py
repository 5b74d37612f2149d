"""TensorBoard export of a run, written by TensorBoard's own writer.

``EventFileWriter`` (``tensorboard.summary.writer``: the TFRecord framing, CRC32C and the
``brain.Event:2`` header, the writer torch's ``SummaryWriter`` wraps) with the
``Event``/``Summary`` protocol buffers of ``tensorboard.compat.proto``; neither TensorFlow
nor torch is imported.  Each scalar is a ``simple_value`` (what ``SummaryWriter.add_scalar``
writes), so TensorBoard's scalar dashboard and ``EventAccumulator.Scalars`` read it.

Scalars written, per step of rank 0 (x = the step number, wall time = the event's):
``<phase>/step_time_s`` (straggler time over all ranks), ``<phase>/loss``,
``<phase>/samples_per_s``, ``<phase>/tokens_per_s``, ``<phase>/mfu``,
``<phase>/mem_bytes``, ``<phase>/ttft_s``, ``<phase>/per_token_s``, for ``warmup`` and
``measure``; then ``summary/*`` at the last step: the steady-state mean step time, its
CI, the throughput.  The mapping is ``accelctl.analysis.scalars`` (shared with the MLflow and
W&B exports and the runner's live logging); all figures come from ``accelctl.analysis.stats``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelctl.analysis.scalars import run_scalars

__all__ = ["EVENT_FILE_PREFIX", "export_run", "run_scalars"]

#: how TensorBoard names event files (the writer adds time, host, pid and a counter)
EVENT_FILE_PREFIX = "events.out.tfevents."


def export_run(record_: Any, out_dir: str | Path) -> Path:
    """Write ``<out_dir>/<run id>/events.out.tfevents.*`` for a stored run; an earlier
    export of the same run in that folder is replaced (one event file per run)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    scalars = run_scalars(record_.events())
    folder = Path(out_dir) / record_.id
    for old in folder.glob(EVENT_FILE_PREFIX + "*"):
        old.unlink()
    writer = EventFileWriter(str(folder))
    try:
        for wall, step, values in scalars:
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)
                                                 for tag, value in values])
            writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))
    finally:
        writer.close()
    (path,) = folder.glob(EVENT_FILE_PREFIX + "*")
    return path

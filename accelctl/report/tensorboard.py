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
CI, the throughput.  All figures come from ``accelctl.analysis.stats``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelctl.analysis.stats import steady_state, step_key, straggler_times
from accelctl.contract.events import StepMetrics

_SCALAR_FIELDS = ("loss", "samples_per_s", "tokens_per_s", "mfu", "mem_bytes", "ttft_s", "per_token_s")
#: how TensorBoard names event files (the writer adds time, host, pid and a counter)
EVENT_FILE_PREFIX = "events.out.tfevents."


def run_scalars(events: list[Any]) -> list[tuple[float, int, list[tuple[str, float]]]]:
    """(wall time, step, [(tag, value)]) per rank-0 step, then the summary scalars."""
    steps = [e for e in events if isinstance(e, StepMetrics)]
    times = straggler_times(steps)
    out = []
    for s in (s for s in steps if s.rank == 0):
        values = [(f"{s.phase}/step_time_s", times[step_key(s)])]
        values += [(f"{s.phase}/{f}", float(getattr(s, f))) for f in _SCALAR_FIELDS if getattr(s, f) is not None]
        out.append((float(s.time_unix_s), int(s.step), values))
    stats = steady_state(events)
    if out and stats.step_time is not None:
        st = stats.step_time
        summary = [("summary/step_time_mean_s", st.mean), ("summary/step_time_median_s", st.median),
                   ("summary/step_time_p90_s", st.p90)]
        if stats.step_time_ci is not None:
            summary += [("summary/step_time_ci_low_s", stats.step_time_ci.low),
                        ("summary/step_time_ci_high_s", stats.step_time_ci.high)]
        for name, rate in (("samples_per_s", stats.samples_per_s), ("tokens_per_s", stats.tokens_per_s)):
            if rate is not None:
                summary.append((f"summary/{name}", rate.steady))
        out.append((out[-1][0], out[-1][1], summary))
    return out


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

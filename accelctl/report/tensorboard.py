"""TensorBoard export of a run, with no dependency at all.

An event file is a TFRecord stream of ``tensorflow.Event`` protocol buffers; the few
fields a scalar needs are encoded by hand here:

    record  = uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
    Event   = 1: wall_time (double), 2: step (int64), 3: file_version (string),
              5: summary (Summary)
    Summary = 1: repeated Value;  Value = 1: tag (string), 2: simple_value (float)

``masked_crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8`` (mod 2^32), CRC-32C
(Castagnoli).  TensorBoard reads these files as it reads its own writer's (the tests
read them back with ``tensorboard``'s EventAccumulator when it is installed).

Scalars written, per step of rank 0 (x = the step number, wall time = the event's):
``<phase>/step_time_s`` (straggler time over all ranks), ``<phase>/loss``,
``<phase>/samples_per_s``, ``<phase>/tokens_per_s``, ``<phase>/mfu``,
``<phase>/mem_bytes``, ``<phase>/ttft_s``, ``<phase>/per_token_s``, for ``warmup`` and
``measure``; then ``summary/*`` at the last step: the steady-state mean step time, its
CI, the throughput.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from accelctl.analysis.stats import steady_state, step_key, straggler_times
from accelctl.contract.events import StepMetrics

_SCALAR_FIELDS = ("loss", "samples_per_s", "tokens_per_s", "mfu", "mem_bytes", "ttft_s", "per_token_s")


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 as protobuf encodes it (two's complement)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_event(wall_time: float, step: int = 0, *, file_version: str | None = None,
                 scalars: Iterable[tuple[str, float]] = ()) -> bytes:
    """One serialized ``Event`` protocol buffer."""
    out = bytearray(_varint(1 << 3 | 1) + struct.pack("<d", wall_time))
    if step:
        out += _varint(2 << 3 | 0) + _varint(step)
    if file_version is not None:
        out += _len_field(3, file_version.encode())
    values = b"".join(_len_field(1, _len_field(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value))
                      for tag, value in scalars)
    if values:
        out += _len_field(5, values)
    return bytes(out)


def record(data: bytes) -> bytes:
    """One TFRecord frame around ``data``."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def read_records(path: Path) -> Iterator[bytes]:
    """The payloads of a TFRecord file, every CRC checked (for tests and sanity)."""
    data = Path(path).read_bytes()
    pos = 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (n,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if crc != masked_crc(header):
            raise ValueError(f"{path}: bad length CRC at byte {pos}")
        payload = data[pos + 12:pos + 12 + n]
        (crc,) = struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])
        if crc != masked_crc(payload):
            raise ValueError(f"{path}: bad data CRC at byte {pos}")
        yield payload
        pos += 16 + n


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


def export_run(record_: Any, out_dir: str | Path, hostname: str | None = None) -> Path:
    """Write ``<out_dir>/<run id>/events.out.tfevents.<start>.<host>`` for a stored run."""
    events = record_.events()
    scalars = run_scalars(events)
    start = scalars[0][0] if scalars else float(record_.summary.get("started_unix_s") or 0.0)
    folder = Path(out_dir) / record_.id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"events.out.tfevents.{int(start)}.{hostname or socket.gethostname()}"
    with open(path, "wb") as fh:
        fh.write(record(encode_event(start, file_version="brain.Event:2")))
        for wall, step, values in scalars:
            fh.write(record(encode_event(wall, step, scalars=values)))
    return path

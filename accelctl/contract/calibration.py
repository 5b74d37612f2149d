"""The machine's measured matmul ceiling, stored once per device and thread count.

``accelctl doctor --calibrate`` measures it (``accelctl.worker.calibrate``) and stores it here;
the worker's MFU divides by it instead of probing a per-run best-of, which was noisy and biased
up.  One JSON file (``path()``) holds one dated entry per ``key(device, threads)``, so a run can
say which measurement its MFU is against.  A missing, unreadable or foreign file reads as "no
calibration", and so does one others could have written (``accelctl.private_files``): it
changes what estimates and MFU say.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from accelctl import private_files
from accelctl.contract.envnames import CALIBRATION_FILE
from accelctl.frozen import Value, field, fields, to_dict
from accelctl.hostinfo import cache_dir

SCHEMA = 1
#: the file, as its warning names it
WHAT = "the matmul calibration"
#: a larger file is not a calibration this code wrote (its entries are small)
MAX_BYTES = 1 << 20


def path() -> Path:
    if os.environ.get(CALIBRATION_FILE):
        return Path(os.environ[CALIBRATION_FILE])
    return cache_dir() / "calibration.json"


def key(device: str, threads: int) -> str:
    return f"{device} | threads={threads}"


class Calibration(Value):
    """One measured ceiling: FLOP/s per dtype name (``float32``, ``bfloat16``)."""

    device: str
    threads: int
    date: str  # ISO 8601, UTC
    flops: dict[str, float]
    method: str = ""  # e.g. "median of 2048x2048 matmuls over 2.0 s after 0.5 s warm-up"
    torch: str = ""
    samples: dict[str, int] = field(default_factory=dict)

    def ceiling(self, dtype: str) -> tuple[float, str] | None:
        """(FLOP/s, dtype it was measured in) for a run in ``dtype``: that dtype's ceiling when
        measured, else the fp32 one (an emulated dtype's MFU then shows what emulation costs)."""
        for name in (dtype, "float32"):
            if self.flops.get(name):
                return float(self.flops[name]), name
        return None


def load_all(file: Path | None = None) -> dict[str, Calibration]:
    """The stored entries; {} where there are none, or where the file or its folder is not this
    user's alone (``accelctl.private_files``: one warning, and the command goes on without)."""
    file = file or path()
    if not file.parent.is_dir():
        return {}
    problem = private_files.folder_problem(file.parent)
    if problem:
        private_files.distrust(WHAT, file.parent, problem)
        return {}
    try:
        data = json.loads(private_files.read_file(file, MAX_BYTES).decode("utf-8"))
    except private_files.Untrusted as exc:
        private_files.distrust(WHAT, file, exc.strerror or str(exc))
        return {}
    except (OSError, ValueError, RecursionError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) and data.get("schema") == SCHEMA else None
    if not isinstance(entries, dict):
        return {}
    checked = {k: _entry(v) for k, v in entries.items()}
    if any(c is None or k != key(c.device, c.threads) for k, c in checked.items()):
        return {}  # not a file this code wrote
    return checked  # type: ignore[return-value]


_FIELDS = {f.name for f in fields(Calibration)}


def _positive(x: object, kind: type) -> bool:
    return (type(x) is kind or (kind is float and type(x) is int)) and 0 < x < float("inf")  # type: ignore[operator]


def _entry(v: object) -> Calibration | None:
    """One stored entry, every value of the type and range this code writes; None otherwise."""
    if not isinstance(v, dict) or not {"device", "threads", "date", "flops"} <= set(v) <= _FIELDS:
        return None
    texts_ok = all(type(v.get(name, "")) is str for name in ("device", "date", "method", "torch"))
    flops, samples = v["flops"], v.get("samples", {})
    if (not texts_ok or not _positive(v["threads"], int) or not isinstance(flops, dict) or not isinstance(samples, dict)
            or not all(type(k) is str and _positive(x, float) for k, x in flops.items())
            or not all(type(k) is str and _positive(x, int) for k, x in samples.items())):
        return None
    return Calibration(**v)


def store_problem(file: Path | None = None) -> str:
    """Why a calibration cannot be stored at ``file`` (its folder made, mode 0700, if missing):
    a folder others could write, or something there that is not this user's own regular file
    (a device, a FIFO, a link: never replaced); "" when it can."""
    file = file or path()
    return private_files.make_folder(file.parent) or private_files.file_problem(file)


def lookup(device: str, threads: int, file: Path | None = None) -> Calibration | None:
    return load_all(file).get(key(device, threads))


#: the DSL's precision names -> the dtype names calibrations are stored under
DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def speed_vs_fp32(dtype: str, device: str, threads: int, file: Path | None = None,
                  entries: Iterable[Calibration] | None = None) -> tuple[float, str] | None:
    """(``dtype``'s measured matmul FLOP/s over fp32's, where from) on ``device``: the stored
    calibration (``entries``, else the file's) at ``threads``, else the one at the nearest thread
    count; None where none measured both dtypes (the caller then goes by the CPU's flags)."""
    name = DTYPE_NAMES.get(dtype, dtype)
    pool = load_all(file).values() if entries is None else entries
    entries = [c for c in pool if c.device == device and c.flops.get(name) and c.flops.get("float32")]
    if not entries:
        return None
    best = min(entries, key=lambda c: (abs(c.threads - threads), c.threads))
    return (best.flops[name] / best.flops["float32"],
            f"accelctl doctor --calibrate, {best.date[:10]}, threads={best.threads}")


def store(entry: Calibration, file: Path | None = None) -> Path:
    """Add or replace ``entry`` (atomically: a concurrent reader never sees half a file);
    ``Untrusted`` where the folder is not this user's alone, ``OSError`` where it cannot be written."""
    file = file or path()
    problem = store_problem(file)
    if problem:
        raise private_files.Untrusted(f"cannot store the calibration in {file}: {problem}")
    entries = load_all(file)
    entries[key(entry.device, entry.threads)] = entry
    text = json.dumps({"schema": SCHEMA, "entries": {k: to_dict(v) for k, v in sorted(entries.items())}}, indent=2)
    import tempfile  # here: ``plan`` reads calibrations and never stores one (cold start)

    try:
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".calibration-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            os.replace(tmp, file)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise OSError(exc.errno, f"cannot store the calibration in {file}: {exc.strerror or exc}") from None
    return file

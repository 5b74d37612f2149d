"""Weights & Biases export of stored runs (``accelctl report RUN... --wandb [PROJECT]``),
through ``wandb`` itself in offline mode (``wandb.init(mode="offline")``, what
``WANDB_MODE=offline`` selects; it overrides the variable): nothing leaves the machine; ``wandb sync DIR``
(printed) is the user's step.

Each accelctl run becomes one offline W&B run (project = PROJECT, else the workload name;
name = the accelctl run id; group = its experiment), written as the runner's live logging
writes it (``accelctl.run.tracking.writers``): the typed config (``tracking.run_params``), W&B
tags = the run's status (and ``rehearsal``), one ``log`` call per rank-0 step with its
``train/*`` (``eval/*``, ``gen/*``) figures and ``train/global_step`` -- accelctl's step
number, the ``define_metric`` step of every figure -- the headline figures in the run's
summary and ``summary.json`` saved with the run.  The accelctl run id, status and summary
fingerprint are in the config under ``accelctl``.

The files go to ``<dir>/wandb/offline-run-<time>-<id>/`` (``dir``: ``--wandb-dir``, else
the run store).  The W&B run id is derived from the accelctl run id, so logging a run again
replaces its earlier offline folder: ``wandb sync`` never uploads two runs for one.
``export_runs`` ends with ``wandb.teardown()``: the offline files are complete when it returns,
and each ``.wandb`` file is read back to its exit record (wandb-core, a process of its own, says
nothing when the disk fills: the file is only cut short).  A failed export removes what it added
and puts back the earlier offline folders it was replacing.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

from accelctl.report.exportpath import errno_in, remove, writable_folder
from accelctl.report.mlflow_export import experiment_of
from accelctl.report.tracking import prefix_of, run_params, run_tags, step_rows
from accelctl.run.tracking import fields, writers
from accelctl.run.tracking.fields import wandb_run_id

__all__ = ["export_runs", "log_run", "offline_dirs", "wandb_run_id"]


def offline_dirs(out_dir: Path, run_id: str) -> list[Path]:
    return writers.wandb_offline_dirs(out_dir, run_id)


class IncompleteRun(OSError):
    """wandb-core (its own process) could not write an offline run whole; the errno is the one
    its log names, else the one a probe write into the folder gets, else EIO."""


def log_run(record: Any, project: str | None, out_dir: Path) -> Path:
    """Log one stored run offline; returns its offline run folder."""
    tags, prefix = run_tags(record), prefix_of(record)
    run = writers.wandb_open(project=project or record.workload, run_id=record.id, group=experiment_of(record),
                             out_dir=out_dir, params=run_params(record), tags=tags, prefix=prefix)
    try:
        for step, wall, values in step_rows(record):
            run.log(fields.step_row(prefix, step, wall, values))
    finally:
        writers.wandb_finish(run, {**record.summary, "status": record.status}, record.path, tags)
    (folder,) = offline_dirs(out_dir, wandb_run_id(record.id))
    return folder


def export_runs(records: list, project: str | None, out_dir: str | os.PathLike[str]) -> list[tuple[Any, Path]]:
    """Log ``records`` offline under ``out_dir/wandb``, all of them or none: a failure (an
    ``OSError``; wandb-core writes the files in a process of its own, so its failures are found
    in what it wrote, each ``.wandb`` file read back to its exit record) removes what this call
    added there and puts back what it changed (each run's earlier offline folder, set aside
    meanwhile, and wandb's ``latest-run`` and ``debug*.log`` links)."""
    import logging

    out = Path(out_dir).expanduser().absolute()
    out.mkdir(parents=True, exist_ok=True)
    import wandb

    folder = out / "wandb"
    if os.path.lexists(folder) and not folder.is_dir():  # a file in its place: never removed, never written
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
    before, made = _links(folder), not os.path.lexists(folder)
    aside = [(old, old.with_name(f".{old.name}.accelctl-aside")) for r in records
             for old in offline_dirs(out, wandb_run_id(r.id))]
    raising = logging.raiseExceptions
    logging.raiseExceptions = False  # wandb's debug.log on a full disk: no "--- Logging error ---" on stderr
    done: list[tuple[Any, Path]] = []
    try:
        for old, kept in aside:
            os.rename(old, kept)
        try:
            done = [(r, log_run(r, project, out)) for r in records]
        finally:
            # run.finish() only *informs* wandb-core that the run ended; the run's stream (and
            # its .wandb file) is closed asynchronously.  Tearing the service down waits for
            # it, so the offline files are complete when this returns (seen: a .wandb file read
            # right after finish() lacked its records, 2 times in ~10).
            wandb.teardown()
        for _, run_folder in done:
            _check_whole(run_folder)
    except BaseException:
        _restore(folder, before, aside, made)
        raise
    finally:
        logging.raiseExceptions = raising
    for _, kept in aside:
        shutil.rmtree(kept, ignore_errors=True)
    return done


def _links(folder: Path) -> dict[str, str | None] | None:
    """What ``folder`` holds: {name: link target, or None}; None when there is no folder."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    return {n: (os.readlink(folder / n) if (folder / n).is_symlink() else None) for n in names}


def _restore(folder: Path, before: dict[str, str | None] | None, aside: list[tuple[Path, Path]],
             made: bool) -> None:
    """After a failed export: the offline folders set aside back in place (over a new one of
    the same name), what it added to ``folder`` removed (all of it where it ``made`` it; where
    it could not list it before, nothing), wandb's links as they were."""
    for old, kept in aside:
        if os.path.lexists(kept):
            remove(old)
            try:
                os.rename(kept, old)
            except OSError:
                pass
    if before is None:
        if made:
            remove(folder)
        return
    for name, target in (_links(folder) or {}).items():
        if name not in before:
            remove(folder / name)
        elif before[name] is not None and target != before[name]:
            remove(folder / name)
            try:
                os.symlink(before[name], folder / name)
            except OSError:
                pass


def _check_whole(run_folder: Path) -> None:
    """Raise ``IncompleteRun`` unless the run's ``.wandb`` file reads back to its exit record."""
    files = sorted(run_folder.glob("*.wandb"))
    if files and last_record(files[0]) == "exit":
        return
    log = run_folder / "logs" / "debug-internal.log"
    try:
        err = errno_in("\n".join(line for line in log.read_text(errors="replace").splitlines() if '"ERROR"' in line))
    except OSError:
        err = None
    if err is None:
        try:
            writable_folder(run_folder)
        except OSError as exc:
            err = exc
    no = err.errno if err is not None and err.errno else errno.EIO
    raise IncompleteRun(no, os.strerror(no), str(files[0] if files else run_folder))


def last_record(path: Path) -> str | None:
    """The type of the last whole record of a ``.wandb`` file (``exit`` once a run ended), None
    where it has none or is cut off or damaged: W&B's header (``:W&B``, magic, version) and the
    LevelDB log framing (32 KiB blocks; each chunk CRC-32, length, type FULL/FIRST/MIDDLE/LAST)."""
    from wandb.proto.wandb_internal_pb2 import Record

    try:
        data = path.read_bytes()
    except OSError:
        return None
    if data[:4] != b":W&B":
        return None
    last, pos, block, pending = None, 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the block's tail is padding
            pos += block - pos % block
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            break
        chunk = data[pos + 7:pos + 7 + length]
        if len(chunk) < length or zlib.crc32(bytes([kind]) + chunk) & 0xFFFFFFFF != crc:
            return None
        pending += chunk
        if kind in (1, 4):  # FULL, LAST
            try:
                last = Record.FromString(pending).WhichOneof("record_type")
            except Exception:  # noqa: BLE001 - protobuf's DecodeError: a damaged record
                return None
            pending = b""
        pos += 7 + length
    return last if not pending else None

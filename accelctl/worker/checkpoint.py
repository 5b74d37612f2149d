"""Checkpoint and resume of the training loop (``checkpoint { every = N steps }``).

Every ``every`` optimizer steps, in ``accelctl.contract.checkpoint``'s layout: the model and
optimizer state (rank 0's ``state.pt``; DeepSpeed's ``engine.save_checkpoint``; or every rank's
DCP shards for the ``sharded`` strategy), each rank's RNG states, data position and measurement
state (``rank<N>.pt``), and ``complete.json`` last, after a barrier: every file is written to a
temporary name, fsynced and renamed, so a cut save is skipped by every reader.  A full disk is
named (``CheckpointDiskFull``, the run fails ``disk_full``) whatever the writer made of the error;
earlier checkpoints stay intact.  Resuming replays the deterministic data streams to the saved
position (bitwise-equal losses on CPU); files load with ``weights_only=True``, never as pickles.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import torch

from accelctl.contract import checkpoint as layout
from accelctl.contract import diskspace
from accelctl.contract.events import CheckpointSaved, RunResumed
from accelctl.worker import sharded_checkpoint


class CountedBatches:
    """The loop's batch stream, counting what it hands out (the data position)."""

    def __init__(self, batches) -> None:
        self._batches = batches
        self.drawn = 0

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        batch = next(self._batches)
        self.drawn += 1
        return batch

    def skip(self, n: int) -> None:
        """Draw and drop ``n`` batches: back where a saved run was."""
        for _ in range(n):
            next(self)

    def __getattr__(self, name: str) -> Any:  # tokens_per_sample, source, details ...
        return getattr(self._batches, name)


def rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np

        states["numpy"] = np.random.get_state()
    except ImportError:
        pass
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _rng_globals() -> list:
    """The types numpy's RNG state (``np.random.get_state()``: a uint32 array) is pickled with."""
    try:
        import numpy as np
    except ImportError:
        return []
    core = getattr(np, "_core", None) or np.core
    return [np.ndarray, np.dtype, core.multiarray._reconstruct, type(np.dtype(np.uint32))]


def load_data(path) -> Any:
    """A checkpoint file, read as data only (``weights_only``): an object of any type but tensors,
    containers, numbers and numpy's RNG state types is refused by torch, never constructed."""
    with torch.serialization.safe_globals(_rng_globals()):
        return torch.load(path, map_location="cpu", weights_only=True)


def set_rng_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    torch.set_rng_state(states["torch"])
    if "numpy" in states:
        import numpy as np

        np.random.set_state(states["numpy"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class CheckpointDiskFull(OSError):
    """A checkpoint save cut short by a full disk (or refused before it began: no room for it);
    its partial folder is removed."""

    def __init__(self, step: int, where: Path, detail: str = "") -> None:
        super().__init__(errno.ENOSPC, f"no space left on device while saving checkpoint at step {step} to {where}"
                                       + (f" ({detail})" if detail else ""))
        self.step, self.where = step, where

    def __str__(self) -> str:
        return self.strerror


def disk_full(exc: BaseException, folder: Path) -> bool:
    """Did ``exc``, raised while saving into ``folder``, come from a full disk?  ENOSPC/EDQUOT in
    its chain, or -- for a writer that drops the errno -- a file system left all but full,
    measured before the partial files go."""
    return diskspace.says_disk_full(exc) or diskspace.nearly_full(folder)


def tensor_bytes(obj: Any) -> int:
    """The bytes of the tensors in a (nested) state: what ``torch.save`` writes, less its few
    KiB of pickle and zip records; of a DTensor, this rank's shard."""
    if hasattr(obj, "to_local"):
        obj = obj.to_local()
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def check_room(need: int, step: int, where: Path) -> None:
    """``CheckpointDiskFull`` before a byte is written when the file system has no room for
    ``need`` bytes (and 1 MiB to spare): a save that would fill the disk would also take the
    room the run's events and the other ranks' files need."""
    free = diskspace.free_bytes(where)
    if free is not None and free < need + (1 << 20):
        raise CheckpointDiskFull(step, where, f"about {need / 2**20:.1f} MiB to write, {free / 2**20:.1f} MiB free")


def _barrier(world: int) -> None:
    if world > 1 and torch.distributed.is_initialized():
        torch.distributed.barrier()


class Checkpointer:
    """Saves and restores one rank's part of the training state."""

    def __init__(self, ctx, model, optimizer, scaler, ds, batches: CountedBatches) -> None:
        self.ctx = ctx
        self.every = ctx.job.checkpoint.every
        self.keep = ctx.job.checkpoint.keep
        self.folder = layout.folder_of(ctx.job)
        self.model = getattr(model, "module", model)  # DDP's wrapped module
        self.optimizer = optimizer
        self.scaler = scaler
        self.engine = ds.engine if ds is not None else None
        self.sharded = getattr(ctx.strategy, "sharded_state", False)
        self.batches = batches

    @property
    def enabled(self) -> bool:
        return self.every > 0

    def due(self, step: int) -> bool:
        return self.enabled and step % self.every == 0

    # -- resume -------------------------------------------------------------------------

    def resume(self) -> dict[str, Any] | None:
        """Load the newest complete checkpoint of this run, if any; its measurement state."""
        if not self.enabled:
            return None
        found = layout.latest(self.folder)
        if found is None:
            return None
        t0 = time.perf_counter()
        step, where = found
        ctx = self.ctx
        if self.engine is not None:
            path, _ = self.engine.load_checkpoint(str(self.folder), tag=where.name, load_optimizer_states=True,
                                                  load_lr_scheduler_states=True)
            if path is None:
                raise RuntimeError(f"DeepSpeed could not load the checkpoint {where}")
        elif self.sharded:
            sharded_checkpoint.load(self.model, self.optimizer, where / layout.SHARDED_DIR)
        else:
            state = load_data(where / layout.STATE_FILE)
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scaler is not None and state.get("scaler"):
                self.scaler.load_state_dict(state["scaler"])
        mine = load_data(layout.rank_file(where, ctx.rank))
        if self.sharded and self.scaler is not None and mine.get("scaler"):
            self.scaler.load_state_dict(mine["scaler"])
        self.batches.skip(mine["batches_drawn"])
        set_rng_states(mine["rng"])
        ctx.writer.emit(RunResumed(step=step, path=str(where), rank=ctx.rank, load_s=time.perf_counter() - t0))
        return mine["measurement"]

    # -- save ---------------------------------------------------------------------------

    def save(self, step: int, measurement: dict[str, Any]) -> None:
        """Save this rank's part of step ``step``; ``CheckpointDiskFull`` when the disk is full.
        A save that fails removes its folder first (it may free the room the failure report needs)."""
        where = layout.step_dir(self.folder, step)
        try:
            self._save(step, where, measurement)
        except Exception as exc:
            full = isinstance(exc, CheckpointDiskFull) or disk_full(exc, self.folder)  # before the files go
            if isinstance(exc, sharded_checkpoint.ShardedCheckpointError):  # on every rank: one cause for all
                full = sharded_checkpoint.on_any_rank(full, self.ctx.adapter.device)
            if not (where / layout.MARKER).exists():  # a cut save is never loaded: its room back (every
                shutil.rmtree(where, ignore_errors=True)  # rank: a peer's failure ends the others at the barrier)
            if full and not isinstance(exc, CheckpointDiskFull):
                raise CheckpointDiskFull(step, where) from exc
            raise

    def _save(self, step: int, where: Path, measurement: dict[str, Any]) -> None:
        ctx = self.ctx
        t0 = time.perf_counter()
        if not ctx.job.checkpoint.dir:  # in the run folder: never recreate a removed run
            _mkdir_below(Path(ctx.job.events_dir), where, step)
        else:
            where.mkdir(parents=True, exist_ok=True)
        if self.engine is not None:  # every rank: DeepSpeed writes its own files (ZeRO shards)
            self.engine.save_checkpoint(str(self.folder), tag=where.name, client_state={"accelctl_step": step},
                                        save_latest=False)
        elif self.sharded:  # every rank: its own shards (DCP)
            held = sharded_checkpoint.state(self.model, self.optimizer)
            check_room(tensor_bytes(held), step, where)
            sharded_checkpoint.save(held, where / layout.SHARDED_DIR)
        elif ctx.rank == 0:
            state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                     "scaler": self.scaler.state_dict() if self.scaler is not None else None, "step": step}
            check_room(tensor_bytes(state), step, where)
            layout.write_atomic(where / layout.STATE_FILE, lambda fh: torch.save(state, fh))
        mine = {"rng": rng_states(), "batches_drawn": self.batches.drawn, "measurement": measurement}
        if self.sharded and self.scaler is not None:
            mine["scaler"] = self.scaler.state_dict()
        layout.write_atomic(Path(layout.rank_file(where, ctx.rank)), lambda fh: torch.save(mine, fh))
        if step == ctx.job.debug.kill_in_checkpoint_at_step:  # test hook: a crash mid-save
            os.kill(os.getpid(), signal.SIGKILL)
        _barrier(ctx.world)  # every rank's files are synced before the marker
        if ctx.rank == 0:
            layout.mark_complete(where, {"step": step, "world_size": ctx.world, "strategy": ctx.job.strategy,
                                         "run_id": ctx.job.run_id, "time_unix_s": time.time()})
            self._prune(step)
            size = sum(f.stat().st_size for f in where.rglob("*") if f.is_file())
            ctx.writer.emit(CheckpointSaved(step=step, path=str(where), rank=0, size_bytes=size,
                                            save_s=time.perf_counter() - t0))

    def _prune(self, newest: int) -> None:
        """Keep the newest ``keep`` complete checkpoints; drop older ones and cut-short saves."""
        done = layout.complete(self.folder)
        for _, old in done[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for cut in layout.incomplete(self.folder):
            if int(cut.name.split("-")[1]) < newest:
                shutil.rmtree(cut, ignore_errors=True)


def _mkdir_below(run_dir: Path, where: Path, step: int) -> None:
    """``where`` made one level at a time below ``run_dir``, never ``run_dir`` itself: a run folder
    removed mid-run (even between a check and the save, ``rm -rf`` racing it) fails the save
    instead of being recreated by ``mkdir(parents=True)``."""
    try:
        rel = where.relative_to(run_dir)
    except ValueError:
        where.mkdir(parents=True, exist_ok=True)
        return
    cur = run_dir
    try:
        for part in rel.parts:
            cur = cur / part
            cur.mkdir(exist_ok=True)
    except FileNotFoundError:
        raise RuntimeError(f"the run folder {run_dir} was removed mid-run: checkpoint of step {step} "
                           "not written") from None

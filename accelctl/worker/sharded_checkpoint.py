"""Model and optimizer state of the ``sharded`` strategy (FSDP2, tensor, pipeline parallel and
their combinations) through ``torch.distributed.checkpoint`` (DCP), as torchtitan does it.

``get_state_dict`` gives each rank's view by parameter name; ``dcp.save`` has every rank write its
own shards into one folder (replicated keys once, ``.metadata`` by rank 0).  The optimizer state is
flattened (keyed by parameter), so pipeline stages each save and load their own part of one
checkpoint; loading is ``dcp.load`` in place, then ``set_state_dict``: bit for bit.  DCP's
``CheckpointException`` (a ``BaseException``) becomes ``ShardedCheckpointError`` on every rank at
once, so all agree on the cause (``on_any_rank``), a full disk included.  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from pathlib import Path


class ShardedCheckpointError(RuntimeError):
    """A DCP save or load that failed on some rank (its exception is the ``__cause__``)."""


def _failure(exc, doing: str, folder: Path) -> tuple[str, BaseException | None]:
    """The message of a ``CheckpointException`` and the first failing rank's own exception."""
    failures = getattr(exc, "failures", {}) or {}
    if not failures:
        return f"torch.distributed.checkpoint could not {doing} {folder}: {exc}", None
    rank = min(failures)
    first = failures[rank][0]
    return (f"torch.distributed.checkpoint could not {doing} {folder}: rank {rank}: {type(first).__name__}: {first}",
            first if isinstance(first, BaseException) else None)


def on_any_rank(flag: bool, device) -> bool:
    """Is ``flag`` true on some rank?  A collective: every rank calls it (after a
    ``ShardedCheckpointError`` of a save, all of them do)."""
    import torch
    import torch.distributed as dist

    seen = torch.tensor([int(flag)], device=device)
    dist.all_reduce(seen, op=dist.ReduceOp.MAX)
    return bool(seen.item())


def _options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(flatten_optimizer_state_dict=True)


def state(model, optimizer) -> dict:
    """This rank's model and optimizer state (local shards), keyed by name."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer, options=_options())
    return {"model": model_state, "optimizer": optim_state}


def save(held: dict, folder: Path) -> None:
    """Every rank: its shards of ``held`` (``state``) into ``folder`` (a collective: all ranks
    call it; DCP's writer fsyncs each file)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        dcp.save(held, checkpoint_id=str(folder))
    except CheckpointException as exc:
        message, cause = _failure(exc, "save to", folder)
        raise ShardedCheckpointError(message) from cause


def load(model, optimizer, folder: Path) -> None:
    """Every rank: its part of the saved state into ``model`` and ``optimizer``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import set_state_dict

    held = state(model, optimizer)
    try:
        dcp.load(held, checkpoint_id=str(folder))
    except CheckpointException as exc:
        message, cause = _failure(exc, "load from", folder)
        raise ShardedCheckpointError(message) from cause
    set_state_dict(model, optimizer, model_state_dict=held["model"], optim_state_dict=held["optimizer"],
                   options=_options())

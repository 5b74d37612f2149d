"""Model and optimizer state of the ``sharded`` strategy (FSDP2, tensor, pipeline parallel and
their combinations) through ``torch.distributed.checkpoint`` (DCP), as torchtitan's
checkpoint manager does it.

``get_state_dict`` gives each rank's view keyed by parameter name: DTensors (FSDP shards, TP
slices, both on a 2-D mesh) hold only this rank's part, plain tensors (a TP rank's norms and
embeddings, a pipeline stage's own modules) are whole.  ``dcp.save`` then has every rank
write its own shards into one folder (``__<rank>_0.distcp``); a key several ranks hold
whole (replicas over dp or tp) is written once; the coordinator (rank 0) writes
``.metadata`` after all of them.  The optimizer state is *flattened*
(``state.<param>.<name>``, ``param_groups.<param>.<key>``): keyed by parameter, not by a
per-rank list, so pipeline stages -- whose modules are named by their global block index,
``pipeline.Stage`` -- each save and load their own stage's state in the same checkpoint
(torchtitan's reason for the flag).  Loading reads every rank's part into the state this
rank already holds (``dcp.load`` in place), then ``set_state_dict`` puts it back into the
model and optimizer: bit for bit, whatever rank wrote it.

DCP reports a failure on any rank to every rank as a ``CheckpointException``, a
``BaseException`` that an ``except Exception`` lets through: here it becomes a
``ShardedCheckpointError`` (a ``RuntimeError``) raised from the failing rank's own exception,
and every rank has it at once, so they can agree on its cause (``on_any_rank``): a full disk
that one rank's write met -- torch's writer says "unexpected pos", no errno, and the file
system is full only until a rank removes the cut save -- is a full disk on every rank.
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

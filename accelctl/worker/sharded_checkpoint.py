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
"""

from __future__ import annotations

from pathlib import Path


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

    dcp.save(held, checkpoint_id=str(folder))


def load(model, optimizer, folder: Path) -> None:
    """Every rank: its part of the saved state into ``model`` and ``optimizer``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    held = state(model, optimizer)
    dcp.load(held, checkpoint_id=str(folder))
    set_state_dict(model, optimizer, model_state_dict=held["model"], optim_state_dict=held["optimizer"],
                   options=_options())

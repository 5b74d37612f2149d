"""The symbolic heads of a plan's launches, and what runs each: stated once.

A backend writes ``python ...``, ``torchrun ...`` or ``deepspeed ...`` as the first word of a
launch; whoever runs it -- the local runner (``accelctl.run.supervision.commands``), a Slurm node's agent
(``accelctl.engines.slurm_agents``), a Kubernetes pod (``accelctl.engines.kubernetes``), an AWS
Batch node (``accelctl.engines.batch_entrypoint``) -- puts a Python interpreter in front of
the arguments below, so every process of a run uses that interpreter's environment and no
console script has to be on the ``PATH``.
"""

from __future__ import annotations

#: symbolic head -> the interpreter's arguments that stand for it
HEADS: dict[str, tuple[str, ...]] = {
    "python": (),
    "torchrun": ("-m", "torch.distributed.run"),
    "deepspeed": ("-m", "deepspeed.launcher.runner"),
}


def command(head: str, python: str) -> tuple[str, ...]:
    """The argv prefix that runs ``head`` with the interpreter ``python`` (a path, ``python``
    in a container, ``"$py"`` in a script); KeyError for a head that is not symbolic."""
    return (python, *HEADS[head])

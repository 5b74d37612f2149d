"""``accelctl run --mlflow [URI] --wandb [PROJECT] --tensorboard [DIR]``: log the run live to
the trackers, as a workload's ``track { ... }`` block does (``accelctl.run.tracking``).

``--mlflow`` without URI takes ``$MLFLOW_TRACKING_URI``, else sqlite in ``./mlruns``;
``--wandb`` without PROJECT takes ``$WANDB_PROJECT``, else the workload's name (offline;
``WANDB_MODE`` as ``accelctl.run.tracking.settings`` reads it); ``--tensorboard`` without DIR
writes the event file in the run folder's ``tensorboard/``, with DIR under ``DIR/<run id>/``
(as ``report --tensorboard DIR``).  Each setting is checked before any run starts
(``accelctl.run.tracking.settings``: exit 2 naming the setting).
"""

from __future__ import annotations

import os
from typing import Any

from accelctl.frozen import replace


#: the tracker flags of ``run``: (flag, metavar, help); each takes an optional value
FLAGS = (("--mlflow", "URI", "log the run live to MLflow (default $MLFLOW_TRACKING_URI, else sqlite in ./mlruns); "
                             "e.g. --mlflow sqlite:///runs.db"),
         ("--wandb", "PROJECT", "log the run live to W&B offline (default $WANDB_PROJECT, else the workload); "
                                "wandb sync uploads it; e.g. --wandb my-project"),
         ("--tensorboard", "DIR", "write a TensorBoard event file live (default: the run folder's tensorboard/); "
                                  "e.g. --tensorboard tb/"))


def add_arguments(r: Any) -> None:
    for flag, metavar, text in FLAGS:
        r.add_argument(flag, metavar=metavar, nargs="?", const="", default=None, help=text)


def with_flags(args: Any, plans: list) -> list:
    """``plans`` ((spec, plan, why, repeats)...) with the tracker flags of ``run`` added to each
    plan's tracking; unchanged without flags."""
    if args.mlflow is None and args.wandb is None and args.tensorboard is None:
        return plans
    from accelctl.run.tracking.settings import mlflow_uri, tensorboard_dir, wandb_settings

    uri = mlflow_uri(args.mlflow) if args.mlflow is not None else ""
    wandb_on = args.wandb is not None and wandb_settings()
    tb = tensorboard_dir(args.tensorboard) if args.tensorboard is not None else None
    out = []
    for spec, p, why, n in plans:
        from accelctl.plan.tracking import tracking_notes
        from accelctl.workload.types import TrackSpec

        track = p.tracking or TrackSpec()
        track = replace(
            track, mlflow=uri or track.mlflow,
            wandb=(args.wandb or os.environ.get("WANDB_PROJECT") or p.workload) if wandb_on else track.wandb,
            experiment=track.experiment or p.workload,
            tensorboard=track.tensorboard or tb is not None, tensorboard_dir=tb or track.tensorboard_dir)
        notes = tuple(n for n in p.notes if not n.startswith("tracking: ")) + tuple(tracking_notes(track))
        out.append((spec, replace(p, tracking=track, notes=notes), why, n))
    return out

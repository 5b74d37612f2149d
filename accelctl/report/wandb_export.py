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
``export_runs`` ends with ``wandb.teardown()``: the offline files are complete when it returns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from accelctl.report.mlflow_export import experiment_of
from accelctl.report.tracking import prefix_of, run_params, run_tags, step_rows
from accelctl.run.tracking import fields, writers
from accelctl.run.tracking.fields import wandb_run_id

__all__ = ["export_runs", "log_run", "offline_dirs", "wandb_run_id"]


def offline_dirs(out_dir: Path, run_id: str) -> list[Path]:
    return writers.wandb_offline_dirs(out_dir, run_id)


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
    out = Path(out_dir).expanduser().absolute()
    out.mkdir(parents=True, exist_ok=True)
    import wandb

    try:
        return [(r, log_run(r, project, out)) for r in records]
    finally:
        # run.finish() only *informs* wandb-core that the run ended; the run's stream (and
        # its .wandb file) is closed asynchronously.  Tearing the service down waits for
        # it, so the offline files are complete when this returns (seen: a .wandb file read
        # right after finish() lacked its records, 2 times in ~10).
        wandb.teardown()

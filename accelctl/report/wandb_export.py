"""Weights & Biases export of stored runs (``accelctl report RUN... --wandb [PROJECT]``),
through ``wandb`` itself in offline mode (``wandb.init(mode="offline")``, what
``WANDB_MODE=offline`` selects; it overrides the variable): nothing leaves the machine; ``wandb sync DIR``
(printed) is the user's step.

Each accelctl run becomes one offline W&B run (project = PROJECT, else the workload name;
name = the accelctl run id; group = its workload): config = ``tracking.run_params``, tags
= the run's status (and ``rehearsal``), one ``log`` call per rank-0 step of
``events.jsonl`` with its figures plus ``step`` (accelctl's step number) and
``time_unix_s`` (the event's wall time) -- W&B's own step only counts up, and a
``measure { repeat = N }`` run repeats step numbers -- and the summary's headline
figures as ``summary/<path>`` in the run's summary.  The accelctl run id, status and
summary fingerprint are in the config under ``accelctl``.

The files go to ``<dir>/wandb/offline-run-<time>-<id>/`` (``dir``: ``--wandb-dir``, else
the run store).  The W&B run id is derived from the accelctl run id, so logging a run again
replaces its earlier offline folder: ``wandb sync`` never uploads two runs for one.
``export_runs`` ends with ``wandb.teardown()``: the offline files are complete when it returns.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from accelctl.report.tracking import headline_metrics, run_params, run_tags, step_metrics
from accelctl.run.tracking.fields import wandb_run_id, wandb_step_row

__all__ = ["export_runs", "log_run", "offline_dirs", "wandb_run_id"]


def offline_dirs(out_dir: Path, run_id: str) -> list[Path]:
    return sorted((out_dir / "wandb").glob(f"offline-run-*-{run_id}"))


def _steps(record: Any) -> list[dict[str, float]]:
    """One dict of figures per rank-0 step (in event order), with ``step`` and ``time_unix_s``."""
    grouped: dict[tuple[int, float], list[tuple[str, float]]] = {}
    for key, value, step, wall in step_metrics(record):
        grouped.setdefault((step, wall), []).append((key, value))
    return [wandb_step_row(step, wall, values) for (step, wall), values in grouped.items()]


def log_run(record: Any, project: str | None, out_dir: Path) -> Path:
    """Log one stored run offline; returns its offline run folder."""
    import wandb

    rid = wandb_run_id(record.id)
    for old in offline_dirs(out_dir, rid):
        shutil.rmtree(old)
    tags = run_tags(record)
    labels = [record.status] + (["rehearsal"] if "accelctl.rehearsal_of" in tags else [])
    config = {**run_params(record), "accelctl": tags}
    run = wandb.init(project=project or record.workload, name=record.id, id=rid, group=record.workload,
                     dir=str(out_dir), mode="offline", config=config, tags=labels, job_type="accelctl-run",
                     settings=wandb.Settings(silent=True, console="off", save_code=False, x_disable_stats=True,
                                             x_disable_machine_info=True))
    try:
        for row in _steps(record):
            run.log(row)
        run.summary.update({f"summary/{k}": v for k, v in headline_metrics(record.summary).items()})
    finally:
        run.finish(exit_code=0 if record.status == "ok" else 1)
    (folder,) = offline_dirs(out_dir, rid)
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

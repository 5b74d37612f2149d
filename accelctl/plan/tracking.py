"""What a plan says about live logging (``track { ... }``, ``accelctl.run.tracking``).

* ``resolve_tracking(spec)``: the workload's ``track`` block as the runner will use it --
  a relative ``sqlite:///`` or ``file:`` path made absolute against the workload's folder
  (like its data, model and checkpoint paths), the experiment defaulted to the workload's
  name; None where the workload tracks nothing.
* ``tracking_notes(track)``: one plan note per tracker, saying where the run will be logged.
* ``missing_trackers(track)``: the tracking libraries the block needs that this Python
  cannot import, found with ``importlib.util.find_spec`` (nothing is imported: ``plan`` and
  ``validate`` stay light).  ``accelctl run`` refuses to start then (E594); a plan warns.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from accelctl.workload.types import TrackSpec, WorkloadSpec
from accelctl.frozen import replace

#: tracker -> (the module it needs, what installs it)
LIBRARIES = {"mlflow": ("mlflow", "'accelctl[track]' mlflow-skinny==3.17.2"), "wandb": ("wandb", "'accelctl[track]'"),
             "tensorboard": ("tensorboard", "'accelctl[report]'")}


def _absolute_uri(uri: str, base: Path) -> str:
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):]
        return uri if path.startswith("/") else "sqlite:///" + str((base / path).expanduser())
    if uri.startswith("file:") and not uri.startswith("file:/"):
        return (base / uri[len("file:"):]).expanduser().as_uri()
    return uri


def resolve_tracking(spec: WorkloadSpec) -> TrackSpec | None:
    track = spec.track
    if not track.enabled:
        return None
    base = Path(spec.path).resolve().parent if spec.path and spec.path != "<input>" else Path.cwd()
    return replace(track, mlflow=_absolute_uri(track.mlflow, base) if track.mlflow else "",
                   experiment=track.experiment or spec.name)


def tracking_notes(track: TrackSpec | None) -> list[str]:
    if track is None:
        return []
    notes = []
    if track.mlflow:
        notes.append(f"tracking: MLflow {track.mlflow}, experiment {track.experiment!r}, logged live by the runner "
                     "(params, per-step metrics, summary, plan and workload as artifacts)")
    if track.wandb:
        notes.append(f"tracking: W&B project {track.wandb!r} (group {track.experiment!r}), offline files under "
                     "$WANDB_DIR, else the run folder; `wandb sync` uploads them")
    if track.tensorboard:
        notes.append("tracking: TensorBoard event file in the run folder's tensorboard/, written live by the runner")
    return notes


def missing_trackers(track: TrackSpec | None) -> list[str]:
    """The trackers (``mlflow``, ``wandb``, ``tensorboard``) the block names whose library
    this Python cannot import."""
    if track is None:
        return []
    wanted = [name for name, on in (("mlflow", track.mlflow), ("wandb", track.wandb),
                                    ("tensorboard", track.tensorboard)) if on]
    return [name for name in wanted if not importable(LIBRARIES[name][0])]


def importable(module: str) -> bool:
    """True when this Python can import ``module`` (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_hint(names: list[str]) -> str:
    packages = dict.fromkeys(p for n in names for p in LIBRARIES[n][1].split())
    return "pip install " + " ".join(packages) + " (./scripts/setup.sh --test installs them)"


def missing_message(track: TrackSpec | None) -> str | None:
    """One line for E594, or None when every library the block needs is importable."""
    missing = missing_trackers(track)
    if not missing:
        return None
    return (f"E594: the workload's track block logs to {', '.join(missing)}, which this Python cannot import; "
            f"the run is not started without it: {install_hint(missing)}")


def logging_launch(plan) -> str | None:
    """The launch whose runner logs the run to the trackers when the launches run on different
    machines (``accelctl run --launch NAME``, one runner per node): the one that starts rank 0,
    i.e. the first launch that is not a ``wait`` pass (a pre-compilation runs no ranks), else the
    first; None for a plan without launches."""
    launches = list(plan.launches)
    return next((ln.name for ln in launches if not ln.wait), launches[0].name if launches else None)


def tracks_here(plan, only=None) -> bool:
    """True when a runner starting the launches ``only`` (None: all of them) logs ``plan``'s run
    to its trackers: exactly one runner of a multi-node run does (``logging_launch``'s), so a
    tracker gets one run, not one per node, and only its machine needs the tracker libraries."""
    if plan.tracking is None or not plan.tracking.enabled:
        return False
    return only is None or logging_launch(plan) in set(only)


def local_ranks(plan, only=None) -> int | None:
    """How many ranks report to a runner that starts the launches ``only`` (the sum of their
    ``processes``, ``wait`` passes apart); None when it starts them all (the run's world size,
    told by rank 0, then counts)."""
    if only is None:
        return None
    wanted = set(only)
    return sum(ln.processes for ln in plan.launches if ln.name in wanted and not ln.wait) or None

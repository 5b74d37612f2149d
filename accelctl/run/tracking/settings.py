"""The tracker settings of the command line and the environment, checked before anything is
logged or run: ``--mlflow/--wandb/--tensorboard`` of ``accelctl run`` and ``accelctl report``.

Defaults are the trackers' own (``$MLFLOW_TRACKING_URI``, else sqlite in ``./mlruns``;
``WANDB_MODE``, ``online`` refused: accelctl logs W&B offline, ``wandb sync`` uploads).  A setting
the trackers refuse (a library missing, a URI MLflow will not open, a ``WANDB_*`` value wandb
cannot parse, a folder that cannot be made) is a usage error (exit 2) naming the setting, never a
traceback.  ``report`` checks the places its exports write itself (``accelctl.report.exports``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from accelctl import exitcodes
from accelctl.errors import AccelctlError
from accelctl.plan.tracking import LIBRARIES, importable, install_hint

_REMOTE = ("http://", "https://", "databricks")


def _usage(flag: str, message: str) -> AccelctlError:
    return AccelctlError(f"{flag}: {message}", exit_code=exitcodes.USAGE)


def need(flag: str) -> None:
    """Exit 2 when the tracker of ``flag`` (``--mlflow``...) cannot be imported here."""
    name = flag.lstrip("-")
    module = LIBRARIES[name][0]
    if not importable(module):
        raise _usage(flag, f"needs {module}, which this Python ({sys.executable}) cannot import: "
                           f"{install_hint([name])}")


def mlflow_uri(uri: str) -> str:
    """The tracking URI of ``--mlflow [URI]`` (``$MLFLOW_TRACKING_URI``, else ``./mlruns``),
    a local one opened once through MLflow's client: refused -> exit 2 naming it."""
    need("--mlflow")
    given = uri or os.environ.get("MLFLOW_TRACKING_URI", "")
    setting = f"--mlflow {uri}" if uri else (f"MLFLOW_TRACKING_URI={given}" if given else "--mlflow")
    from accelctl.run.tracking.mlflow_store import DEFAULT_DIR, quiet, resolve_uri

    given = given or DEFAULT_DIR
    if "://" not in given and not given.startswith(("file:", "databricks")):
        given = str(Path(given).expanduser().absolute())  # a folder: the runner's cwd may differ
    if given.startswith(_REMOTE):
        return given
    try:
        resolved, _ = resolve_uri(given)
        from mlflow.tracking import MlflowClient

        quiet()
        MlflowClient(tracking_uri=resolved).search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - MLflow's refusals have many types; each is the user's URI
        text = " ".join(str(getattr(exc, "message", exc)).split())[:300]
        raise AccelctlError(f"{setting}: MLflow cannot use this store ({type(exc).__name__}: {text}); give an "
                            "sqlite:///FILE.db URI, a folder, or an http(s):// tracking server",
                            exit_code=exitcodes.USAGE) from None
    return given


def wandb_settings() -> bool:
    """W&B's own settings from the environment, checked: exit 2 naming the variable; False
    when ``WANDB_MODE=disabled`` turns W&B off (said on stderr)."""
    need("--wandb")
    mode = os.environ.get("WANDB_MODE", "")
    if mode not in ("", "offline", "dryrun", "disabled"):
        raise _usage("WANDB_MODE", f"{mode!r}: accelctl logs W&B offline only (no network); unset it or set "
                                   "WANDB_MODE=offline, then `wandb sync` uploads the run")
    from accelctl.run.tracking.writers import wandb_settings_problem

    problem = wandb_settings_problem()
    if problem:
        raise AccelctlError(f"W&B setting {problem}", exit_code=exitcodes.USAGE)
    if mode == "disabled":
        print("accelctl: --wandb: WANDB_MODE=disabled: W&B not logged", file=sys.stderr)
        return False
    return True


def tensorboard_dir(folder: str) -> str:
    need("--tensorboard")
    if not folder:
        return ""
    path = Path(folder).expanduser().absolute()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _usage(f"--tensorboard {folder}", f"cannot make the folder ({exc.strerror or exc})") from None
    return str(path)

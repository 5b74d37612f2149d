"""``accelctl report --tensorboard DIR --mlflow [URI] --wandb [PROJECT]``: the exports of the
stored runs to the trackers, checked before any table is printed and written after.

``prepare(args, records)`` checks the trackers' settings (``accelctl.run.tracking.settings``:
exit 2 naming the setting) and the places they write (``exportpath``: a TensorBoard folder and
each run's folder in it that is there already, a local MLflow store's folder or sqlite file,
the W&B folder and its ``wandb`` folder), made and probed with a write; ``write`` exports.
A place that cannot be written, then or halfway through (the disk fills), is exit 1:
``accelctl: error: --tensorboard: cannot export to PATH: No space left on device (ENOSPC)``
(in ``--json``, the document's error).  An export that fails leaves nothing of itself: what it
was about to create is removed (``exportpath.Undo``), an earlier export it replaces stays as it
was -- of every run it exports, or of none (TensorBoard writes them all before placing any);
each tracker that finished keeps what it wrote.  A store MLflow refuses for another reason
is E595, a W&B failure that is not the folder's E596.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Any

from accelctl.errors import AccelctlError, Diagnostic
from accelctl.report.exportpath import (Undo, os_error, refusal, shown, writable_file, writable_folder,
                                        writable_folder_exists)


class Exports:
    """The trackers one ``report`` exports to, their places checked."""

    def __init__(self) -> None:
        self.tensorboard: Path | None = None
        self.mlflow: str | None = None  #: the URI, as ``settings.mlflow_uri`` gives it
        self.mlflow_path: Path | None = None  #: a local store: its folder or sqlite file
        self.wandb: str | None = None  #: the project ("" = the workload's)
        self.wandb_dir: Path | None = None
        self.wandb_flag = "--wandb"
        self._undo: dict[str, Undo] = {}

    def undo(self, tracker: str) -> Undo:
        return self._undo.setdefault(tracker, Undo())

    def discard(self) -> None:
        """What the trackers that did not finish made, removed."""
        for u in self._undo.values():
            u.undo()

    def write(self, records: list) -> None:
        if self.tensorboard is not None:
            _tensorboard(records, self.tensorboard)
            self.undo("tensorboard").keep()
        if self.mlflow is not None:
            _mlflow(records, self.mlflow, self.mlflow_path)
            self.undo("mlflow").keep()
        if self.wandb is not None and self.wandb_dir is not None:
            _wandb(records, self.wandb, self.wandb_dir, self.wandb_flag)
            self.undo("wandb").keep()


def prepare(args: Any, records: list = ()) -> Exports:
    """The exports ``args`` asks for of ``records``, their settings and places checked (nothing
    exported); on a refusal what the checks made is removed again."""
    from accelctl.run.tracking import settings

    ex = Exports()
    try:
        if args.mlflow is not None:
            ex.mlflow = _mlflow_store(args.mlflow, ex)
        if args.wandb is not None and settings.wandb_settings():
            from accelctl.run.store import runs_root

            ex.wandb = args.wandb
            ex.wandb_flag = "--wandb-dir" if args.wandb_dir is not None else "--wandb"
            given = _named(ex.wandb_flag, args.wandb_dir) if args.wandb_dir is not None else runs_root(args.runs_dir)
            ex.wandb_dir = _folder(ex.wandb_flag, given, ex.undo("wandb"))
            _inner(ex.wandb_flag, given, ["wandb"])
        if args.tensorboard is not None:
            settings.need("--tensorboard")
            given = _named("--tensorboard", args.tensorboard)
            ex.tensorboard = _folder("--tensorboard", given, ex.undo("tensorboard"))
            _inner("--tensorboard", given, [r.id for r in records])
    except BaseException:
        ex.discard()
        raise
    return ex


def _named(flag: str, text: str) -> Path:
    """The folder ``flag`` names; an empty name is no folder (``Path("")`` would be this one)."""
    if not text:
        raise refusal(flag, text, OSError(errno.ENOENT, os.strerror(errno.ENOENT)))
    return Path(text)


def _folder(flag: str, given: Path, undo: Undo) -> Path:
    folder = given.expanduser().absolute()
    undo.track(folder)
    try:
        writable_folder(folder)
    except OSError as exc:
        raise refusal(flag, given, exc) from None
    return folder


def _inner(flag: str, given: Path, names: list[str]) -> None:
    """The folders an export writes in inside ``given`` (W&B's ``wandb``, a TensorBoard run's),
    where something is there already: each must be a folder this process can write, else the
    refusal names it (a file in its place: ENOTDIR)."""
    for name in names:
        inner = given.expanduser().absolute() / name
        if os.path.lexists(inner):
            try:
                writable_folder(inner)
            except OSError as exc:
                raise refusal(flag, given / name, exc) from None


# ----------------------------------------------------------------------------- TensorBoard


def _tensorboard(records: list, folder: Path) -> None:
    try:
        from accelctl.report.tensorboard import export_runs
    except ModuleNotFoundError as exc:
        raise AccelctlError(f"--tensorboard needs tensorboard ({exc}); pip install 'accelctl[report]'") from None
    try:
        paths = export_runs(records, folder)
    except OSError as exc:
        raise refusal("--tensorboard", folder, exc) from None
    for path in paths:
        print(f"wrote {shown(path)}", file=sys.stderr)


# ----------------------------------------------------------------------------- MLflow


def _mlflow_local(given: str) -> tuple[Path, Path, list[Path]] | None:
    """A local store's (path named in errors, its sqlite file, [paths it may create]), as
    ``mlflow_store.resolve_uri`` lays it out; None for a server (or a URI the settings refuse)."""
    from accelctl.run.tracking.mlflow_store import DB_NAME

    if "://" not in given and not given.startswith(("file:", "databricks")):
        folder = Path(given).expanduser().absolute()
        return folder, folder / DB_NAME, [folder, folder / DB_NAME, folder / "artifacts"]
    if given.startswith("sqlite:///"):
        db = Path(given[len("sqlite:///"):].split("?", 1)[0]).absolute()
        return db, db, [db, db.with_name(db.name + "-journal"), db.parent / "artifacts"]
    return None


def _mlflow_store(uri: str, ex: Exports) -> str:
    """``--mlflow [URI]``: a local store's folder made and its sqlite file (and artifact
    folder) probed, exit 1 naming the path; then ``settings.mlflow_uri`` (exit 2 naming a
    URI MLflow refuses, or exit 1 where the refusal is the disk's)."""
    from accelctl.run.tracking import settings
    from accelctl.run.tracking.mlflow_store import DEFAULT_DIR

    settings.need("--mlflow")
    given = uri or os.environ.get("MLFLOW_TRACKING_URI", "") or DEFAULT_DIR
    local = _mlflow_local(given)
    if given.startswith(("http://", "https://")):
        _reachable(given)
    if local is not None:
        named, db, made = local
        undo = ex.undo("mlflow")
        for path in made:
            undo.track(path)
        try:
            if named != db:
                writable_folder(named)
            writable_file(db)
            if os.path.lexists(db.parent / "artifacts"):
                writable_folder_exists(db.parent / "artifacts")
        except OSError as exc:
            raise refusal("--mlflow", named, exc) from None
        ex.mlflow_path = named
    try:
        return settings.mlflow_uri(uri)
    except AccelctlError as exc:
        # raised ``from None``: MLflow's own exception is still its context
        if local is not None and exc.__context__ is not None and os_error(exc.__context__) is not None:
            raise refusal("--mlflow", local[0], exc.__context__) from None
        raise


#: how long a tracking server has to accept a connection before the export is refused
CONNECT_TIMEOUT_S = 10.0


def _reachable(uri: str) -> None:
    """A tracking server ``uri`` (or the proxy the environment names for it) accepts a TCP
    connection within ``CONNECT_TIMEOUT_S``; else exit 1 naming it and why -- MLflow's own client
    would retry an unreachable one for minutes."""
    import socket
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(uri)
    proxy = getproxies().get(parts.scheme)
    if proxy and parts.hostname and not proxy_bypass(parts.hostname):
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname or "", port), timeout=CONNECT_TIMEOUT_S).close()
    except socket.gaierror as exc:  # not an errno: the resolver's own code
        host = parts.hostname or "no host"
        raise AccelctlError(f"--mlflow: cannot export to {shown(uri)}: {exc.strerror} ({host})") from None
    except (OSError, ValueError) as exc:  # refused, unreachable, timed out; a port out of range
        raise refusal("--mlflow", uri, exc) from None


def _mlflow(records: list, uri: str, local: Path | None) -> None:
    """Log each run to the MLflow store; a store MLflow refuses is one line: the path and its
    errno for a local store's disk, else E595."""
    try:
        from accelctl.report.mlflow_export import experiment_of, export_runs
        from mlflow.exceptions import MlflowException
    except ModuleNotFoundError as exc:
        raise AccelctlError(f"--mlflow needs mlflow-skinny ({exc}); scripts/setup.sh --test installs it "
                            "(or pip install 'accelctl[track]' mlflow-skinny==3.17.2)") from None
    try:
        tracking_uri, done = export_runs(records, uri or None)
    except (MlflowException, OSError) as exc:
        if local is not None and os_error(exc) is not None:
            raise refusal("--mlflow", local, exc) from None
        message = str(getattr(exc, "message", exc)).splitlines()[0]
        raise AccelctlError(diagnostics=[Diagnostic(
            "E595", f"MLflow store {uri or '(default)'} refused the runs: {message}",
            path="accelctl report --mlflow", hint="an sqlite:///FILE.db URI, a folder, "
            "or an http(s):// tracking server")]) from None
    for record, run_id, what in done:
        print(f"mlflow: {what} {record.id} -> run {run_id} (experiment {experiment_of(record)})", file=sys.stderr)
    print(f"mlflow: {tracking_uri}", file=sys.stderr)


# ----------------------------------------------------------------------------- W&B


def _wandb(records: list, project: str, out: Path, flag: str) -> None:
    """Log each run to W&B offline; print the ``wandb sync`` step.  The folder's failures are
    the path and its errno; wandb's others E596."""
    try:
        import wandb

        from accelctl.report.wandb_export import export_runs
    except ModuleNotFoundError as exc:
        raise AccelctlError(f"--wandb needs wandb ({exc}); pip install 'accelctl[track]'") from None
    try:
        done = export_runs(records, project or None, out)
    except (wandb.Error, OSError) as exc:
        if os_error(exc) is not None:
            raise refusal(flag, out, exc) from None
        raise AccelctlError(diagnostics=[Diagnostic(
            "E596", f"wandb could not log the runs offline: {str(exc).splitlines()[0] if str(exc) else exc!r}",
            path="accelctl report --wandb", hint="--wandb-dir DIR: a writable folder")]) from None
    for record, folder in done:
        print(f"wandb: logged {record.id} offline -> {folder}", file=sys.stderr)
    if done:
        import shlex

        print("wandb: upload with: wandb sync " + " ".join(shlex.quote(str(f)) for _, f in done), file=sys.stderr)

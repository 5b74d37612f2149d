"""``accelctl report --tensorboard/--mlflow/--wandb`` to a place that cannot be written: exit 1
with one line naming the path and the errno -- in ``--json`` the document's error -- never a
traceback (exit 70) or a "setting" (exit 2), and nothing of the export left behind: what it was
about to create is gone, an earlier export it would replace is as it was.

Full disks are real ones: a small tmpfs (root, where ``mount`` works; skipped otherwise), or
``RLIMIT_FSIZE`` (any user: the write past the limit fails with EFBIG, SIGXFSZ being ignored by
Python).  Read-only places: a read-only tmpfs as root (root passes every mode check), a folder
of mode 0555 otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from accelctl.cli import main

RUNS = Path(__file__).parent / "fixtures" / "store"
RUN = "20260101-000100-fixture_train-big-0002"

FLAGS = {"tensorboard": lambda p: ["--tensorboard", str(p)],
         "mlflow": lambda p: [f"--mlflow={p}"],
         "wandb": lambda p: ["--wandb", "p", "--wandb-dir", str(p)]}


def report(capsys, tracker: str, path, *more: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["report", "0002", "--runs-dir", str(RUNS), "-f", "md", *FLAGS[tracker](path), *more])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, tracker: str, path, errname: str) -> str:
    """Exit 1, one line naming ``path`` and ``errname``, before any table."""
    code, out, err = report(capsys, tracker, path)
    shown = str(path) if str(path) and str(path).isprintable() else repr(str(path))
    flag = "--wandb-dir" if tracker == "wandb" else f"--{tracker}"
    assert (code, out) == (1, ""), (code, err)
    assert err == f"accelctl: error: {flag}: cannot export to {shown}: " \
        f"{os.strerror(getattr(errno, errname))} ({errname})\n"
    return err


def listing(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` and a file's bytes (a link: its target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = os.readlink(p).encode() if p.is_symlink() else (p.read_bytes() if p.is_file() else None)
    return out


# ----------------------------------------------------------------------------- places that are not folders


def _special(tmp_path: Path, kind: str) -> tuple[Path, str]:
    if kind == "file":
        (tmp_path / "f").write_text("x")
        return tmp_path / "f", "ENOTDIR"
    if kind == "under_a_file":
        (tmp_path / "f").write_text("x")
        return tmp_path / "f" / "missing" / "dir", "ENOTDIR"
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo", "ENOTDIR"
    if kind == "dangling_link":
        (tmp_path / "link").symlink_to(tmp_path / "nowhere")
        return tmp_path / "link", "ENOENT"
    if kind == "newline_file":
        (tmp_path / "a\nb").write_text("x")
        return tmp_path / "a\nb", "ENOTDIR"
    if kind == "dev_full":
        return Path("/dev/full"), "ENOTDIR"
    assert kind == "proc_self"
    return Path("/proc/self"), "ENOENT"


@pytest.mark.parametrize("tracker", sorted(FLAGS))
@pytest.mark.parametrize("kind", ["file", "under_a_file", "fifo", "dangling_link", "newline_file", "dev_full",
                                  "proc_self"])
def test_a_place_that_is_not_a_writable_folder_is_one_line(tracker, kind, tmp_path, capsys):
    path, errname = _special(tmp_path, kind)
    before = listing(tmp_path)
    refused(capsys, tracker, path, errname)
    assert listing(tmp_path) == before
    assert not (tmp_path / "nowhere").exists()


def test_an_mlflow_server_nothing_listens_on_is_one_line_at_once(capsys):
    """``--mlflow http://HOST:PORT`` where no server listens: exit 1 before any table, naming it
    and the errno -- not MLflow's client retrying it for minutes after the table."""
    import socket
    import time

    with socket.socket() as s:  # a port of this machine's that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    code, out, err = report(capsys, "mlflow", uri)
    assert (code, out) == (1, "") and time.monotonic() - started < 30
    assert err == f"accelctl: error: --mlflow: cannot export to {uri}: {os.strerror(errno.ECONNREFUSED)} (ECONNREFUSED)\n"


@pytest.mark.parametrize("tracker", sorted(FLAGS))
def test_a_refused_path_through_a_new_folder_and_back_leaves_no_folder(tracker, tmp_path, capsys):
    """``new/../f`` (``f`` a file): ``mkdir -p`` makes ``new`` before it meets the file; the
    refusal removes it again, and nothing that was there before."""
    (tmp_path / "f").write_text("x")
    (tmp_path / "kept").mkdir()
    before = listing(tmp_path)
    refused(capsys, tracker, tmp_path / "new" / "deeper" / ".." / ".." / "kept" / ".." / "f", "ENOTDIR")
    assert listing(tmp_path) == before


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb"])
def test_an_empty_folder_name_is_no_folder(tracker, tmp_path, capsys, monkeypatch):
    """``--tensorboard ''`` (``--wandb-dir ''``) names no folder: refused, never exit 0 with
    nothing exported, nor an export into the current folder."""
    monkeypatch.chdir(tmp_path)
    refused(capsys, tracker, "", "ENOENT")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kind, errname", [("directory", "EISDIR"), ("fifo", "EINVAL"), ("missing_parent", "ENOENT")])
def test_an_mlflow_sqlite_file_that_cannot_be_a_database(kind, errname, tmp_path, capsys):
    db = tmp_path / "m.db"
    if kind == "directory":
        db.mkdir()
    elif kind == "fifo":
        os.mkfifo(db)  # SQLite would wait on it, or read nothing from a device
    else:
        db = tmp_path / "no" / "such" / "m.db"  # SQLite makes no folders: neither does the export
    code, out, err = report(capsys, "mlflow", f"sqlite:///{db}")
    assert (code, out) == (1, "") and err == f"accelctl: error: --mlflow: cannot export to {db}: " \
        f"{os.strerror(getattr(errno, errname))} ({errname})\n"
    assert not (tmp_path / "no").exists()


def test_json_has_the_refusal_as_its_error(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    capsys.readouterr()
    code = main(["report", "0002", "--runs-dir", str(RUNS), "--json", "--tensorboard", str(tmp_path / "f")])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1 and not doc["ok"] and err == ""
    assert doc["error"]["message"] == f"--tensorboard: cannot export to {tmp_path / 'f'}: Not a directory (ENOTDIR)"


# ----------------------------------------------------------------------------- read-only places


@pytest.fixture
def mount_tmpfs(tmp_path):
    """mount(size, read_only=False) -> a fresh tmpfs folder under tmp_path (root only)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a tmpfs needs root and mount(8)")
    mounted = []

    def make(size: str, read_only: bool = False, prepare=None) -> Path:
        point = tmp_path / f"fs{len(mounted)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"mount -t tmpfs failed here: {done.stderr.strip()}")
        mounted.append(point)
        if prepare:
            prepare(point)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
        return point

    yield make
    for point in reversed(mounted):
        if subprocess.run(["umount", str(point)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


@pytest.fixture
def read_only(tmp_path, request):
    """A folder holding ``existing/`` that this process cannot write."""
    if os.geteuid() == 0:
        yield request.getfixturevalue("mount_tmpfs")("64k", True, lambda p: (p / "existing").mkdir())
        return
    folder = tmp_path / "ro"
    (folder / "existing").mkdir(parents=True)
    os.chmod(folder / "existing", 0o555)
    os.chmod(folder, 0o555)
    yield folder
    os.chmod(folder, 0o755)
    os.chmod(folder / "existing", 0o755)


@pytest.mark.parametrize("tracker", sorted(FLAGS))
def test_a_read_only_place(tracker, read_only, capsys):
    errname = "EROFS" if os.geteuid() == 0 else "EACCES"
    before = listing(read_only)
    refused(capsys, tracker, read_only / "existing", errname)
    refused(capsys, tracker, read_only / "new" / "folder", errname)
    assert listing(read_only) == before


def test_a_folder_without_search_permission(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root searches any folder whatever its mode (the read-only tmpfs test covers root)")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o600)
    try:
        refused(capsys, "tensorboard", locked / "tb", "EACCES")
    finally:
        os.chmod(locked, 0o755)


# ----------------------------------------------------------------------------- disks that fill


def test_tensorboard_on_a_full_disk_and_one_that_fills_halfway(mount_tmpfs, capsys):
    # a 4 KiB tmpfs: the probe's byte fits, the run's ~5 KiB event file does not (the writer
    # of TensorBoard's own EventFileWriter is a thread: this was a traceback, exit 70)
    disk = mount_tmpfs("4k")
    code, _, err = report(capsys, "tensorboard", disk / "a" / "tb")
    assert code == 1 and err == f"accelctl: error: --tensorboard: cannot export to {disk / 'a' / 'tb'}: " \
        "No space left on device (ENOSPC)\n"
    assert listing(disk) == {}
    (disk / "fill").write_bytes(b"x" * 4096)
    code, _, err = report(capsys, "tensorboard", disk / "tb")
    assert code == 1 and "(ENOSPC)" in err and listing(disk) == {"fill": b"x" * 4096}


def test_tensorboard_failing_halfway_keeps_the_earlier_export(tmp_path, capsys):
    """Any user: RLIMIT_FSIZE cuts the event file short (EFBIG) after the probe's byte."""
    assert report(capsys, "tensorboard", tmp_path)[0] == 0
    before = listing(tmp_path)
    (event,) = (tmp_path / RUN).iterdir()
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (event.stat().st_size // 2, limit[1]))
    try:
        code, _, err = report(capsys, "tensorboard", tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
    assert code == 1 and err == f"accelctl: error: --tensorboard: cannot export to {tmp_path}: File too large (EFBIG)\n"
    assert listing(tmp_path) == before  # the earlier export whole, no temporary folder


def test_mlflow_filling_halfway_leaves_the_store_as_it_was(mount_tmpfs, capsys):
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    disk = mount_tmpfs("1200k")
    capsys.readouterr()
    assert main(["report", "0001", "--runs-dir", str(RUNS), "-f", "md", f"--mlflow={disk / 'ml'}"]) == 0
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "fill").write_bytes(b"\0" * (free - 40 * 1024))  # room for the run's start, not its metrics
    code, out, err = report(capsys, "mlflow", disk / "ml")
    assert code == 1 and err == f"accelctl: error: --mlflow: cannot export to {disk / 'ml'}: " \
        "No space left on device (ENOSPC)\n"
    client = MlflowClient(tracking_uri=f"sqlite:///{disk / 'ml' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("fixture_train")
    live = client.search_runs([exp.experiment_id])
    assert [r.info.run_name for r in live] == ["20260101-000000-fixture_train-small-0001"]
    begun = [r for r in client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL) if r.info.run_name == RUN]
    assert all(r.info.lifecycle_stage == "deleted" for r in begun)
    assert {p.name for p in (disk / "ml" / "artifacts" / "fixture_train").iterdir()} == {live[0].info.run_id}


def test_wandb_filling_halfway_puts_the_earlier_offline_run_back(mount_tmpfs, capsys):
    """wandb-core writes the ``.wandb`` file in its own process and says nothing when the disk
    fills: the file read back lacks its exit record (this exported ok, a run cut short)."""
    from accelctl.run.tracking.fields import wandb_run_id

    disk = mount_tmpfs("28k")
    wandb_dir = disk / "wandb"
    earlier = wandb_dir / f"offline-run-20250101_000000-{wandb_run_id(RUN)}"
    earlier.mkdir(parents=True)
    (earlier / "marker").write_text("earlier export")
    (wandb_dir / "latest-run").symlink_to(earlier.name)
    before = listing(disk)
    code, _, err = report(capsys, "wandb", disk)
    assert code == 1 and err == f"accelctl: error: --wandb-dir: cannot export to {disk}: " \
        "No space left on device (ENOSPC)\n"
    assert listing(disk) == before


# ----------------------------------------------------------------------------- several runs: all or nothing

RUN1 = "20260101-000000-fixture_train-small-0001"


def test_tensorboard_of_two_runs_where_the_second_has_a_file_in_its_place(tmp_path, capsys):
    """Refused before any table, naming the run's folder; the first run's export not made."""
    tb = tmp_path / "tb"
    tb.mkdir()
    (tb / RUN).write_text("mine")
    before = listing(tmp_path)
    capsys.readouterr()
    code = main(["report", "0001", "0002", "--runs-dir", str(RUNS), "-f", "md", "--tensorboard", str(tb)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == f"accelctl: error: --tensorboard: cannot export to {tb / RUN}: Not a directory (ENOTDIR)\n"
    assert listing(tmp_path) == before


def test_tensorboard_of_two_runs_failing_on_the_second_leaves_the_first_as_it_was(tmp_path, capsys, monkeypatch):
    from accelctl.run.tracking import writers

    assert main(["report", "0001", "--runs-dir", str(RUNS), "-f", "md", "--tensorboard", str(tmp_path)]) == 0
    before = listing(tmp_path)
    finish, calls = writers.tb_finish, []

    def second_fails(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return finish(*a, **k)

    monkeypatch.setattr(writers, "tb_finish", second_fails)
    capsys.readouterr()
    code = main(["report", "0001", "0002", "--runs-dir", str(RUNS), "-f", "md", "--tensorboard", str(tmp_path)])
    _, err = capsys.readouterr()
    assert (code, err) == (1, f"accelctl: error: --tensorboard: cannot export to {tmp_path}: "
                              "No space left on device (ENOSPC)\n")
    assert listing(tmp_path) == before and len(calls) == 2


def test_tensorboard_of_two_runs_writes_both(tmp_path, capsys):
    assert main(["report", "0001", "0002", "--runs-dir", str(RUNS), "-f", "md", "--tensorboard", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [RUN1, RUN]
    assert all(len(list((tmp_path / r).iterdir())) == 1 for r in (RUN1, RUN))


def test_wandb_dir_whose_wandb_is_a_file(tmp_path, capsys):
    """Named as the folder W&B writes in, and the file left as it was."""
    (tmp_path / "wandb").write_text("mine")
    capsys.readouterr()
    code = main(["report", "0002", "--runs-dir", str(RUNS), "-f", "md", "--wandb", "p", "--wandb-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == f"accelctl: error: --wandb-dir: cannot export to {tmp_path / 'wandb'}: Not a directory (ENOTDIR)\n"
    assert listing(tmp_path) == {"wandb": b"mine"}

"""``-o/--output`` (report, compare, sweep, pick), ``report --plot`` and ``init -o`` to a place
that cannot take the file: exit 1 with one line naming the path and the reason, never a
traceback (exit 70) nor a wait on a FIFO nobody reads, and nothing partial left: an earlier
file at the path stays as it was, no temporary file beside it.

Devices are nodes made with ``mknod`` in the test's own folder (root only: skipped otherwise),
with the numbers of ``/dev/full`` (every write: ENOSPC) and ``/dev/null``.  A full disk is
``RLIMIT_FSIZE`` (any user: a write past the limit fails with EFBIG).
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest

from accelctl import exitcodes
from accelctl.cli import main
from test_export_paths import RUNS, listing

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"

VERBS = {
    "report": ["report", "0002", "--runs-dir", str(RUNS), "-f", "md"],
    "compare": ["compare", "0001", "0002", "--runs-dir", str(RUNS), "-f", "md"],
    "sweep": ["sweep", str(ROOT / "workloads" / "vit_fp8.wl"), "-t", "p4d", "--over", "batch.micro=16,64",
              "--estimate", "-f", "md"],
    "pick": ["pick", str(ROOT / "workloads" / "t5_3b_summarization.wl"), "--work", "1e6 samples", "-f", "md"],
}


class Hung(BaseException):
    """The command waited (on a FIFO nobody reads) past the test's patience."""


@contextmanager
def no_hang(seconds: int = 60):
    def wake(*_):
        raise Hung(f"still waiting after {seconds} s")

    before = signal.signal(signal.SIGALRM, wake)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with no_hang():
        code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def line(flag: str, path, errname: str, why: str | None = None) -> str:
    return f"accelctl: error: {flag}: cannot write {path}: {why or os.strerror(getattr(errno, errname))} ({errname})\n"


def _device(path: Path, minor: int) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))


def place(tmp_path: Path, kind: str, name: str) -> tuple[Path, str, str | None]:
    """(a path where no file can be written, its errno's name, the reason where it is not the
    errno's text)."""
    path = tmp_path / name
    if kind == "directory":
        path.mkdir()
        return path, "EISDIR", None
    if kind == "under_a_file":
        (tmp_path / "f").write_text("x")
        return tmp_path / "f" / name, "ENOTDIR", None
    if kind == "fifo":
        os.mkfifo(path)
        return path, "ENXIO", "a FIFO no process reads"
    if kind == "full_device":
        _device(path, 7)
        return path, "ENOSPC", None
    assert kind == "missing_folder"
    return tmp_path / "no" / name, "ENOENT", None


@contextmanager
def file_size_limit(size: int):
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, limit[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)


# ----------------------------------------------------------------------------- -o/--output


@pytest.mark.parametrize("verb, kind", [("report", k) for k in ("directory", "under_a_file", "fifo", "full_device",
                                                                  "missing_folder")]
                         + [(v, k) for v in ("compare", "sweep", "pick") for k in ("directory", "fifo")])
def test_output_to_a_place_that_takes_no_file_is_one_line(verb, kind, tmp_path, capsys):
    path, errname, why = place(tmp_path, kind, "out.md")
    before = listing(tmp_path)
    code, out, err = cli(capsys, *VERBS[verb], "-o", str(path))
    assert (code, out, err) == (exitcodes.FAILED, "", line("--output", path, errname, why))
    assert listing(tmp_path) == before


@pytest.mark.parametrize("flag", ["-o", "--plot"])
def test_an_empty_output_path_is_no_file_not_no_flag(flag, tmp_path, capsys, monkeypatch):
    """``-o ''`` is a path that names no file: refused naming it, never the table on stdout
    (nor a file named after the current folder written beside it)."""
    if flag == "--plot":
        pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, *VERBS["report"], flag, "")
    name = "--output" if flag == "-o" else flag
    assert (code, err) == (exitcodes.FAILED, line(name, "''", "ENOENT"))
    assert out == "" if flag == "-o" else out.startswith("#")
    assert not list(tmp_path.iterdir())


def test_output_in_json_is_the_documents_error(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    code, out, err = cli(capsys, *VERBS["report"][:-2], "--json", "-o", str(tmp_path / "d"))
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1 and err == ""
    assert doc["error"]["message"] == f"--output: cannot write {tmp_path / 'd'}: Is a directory (EISDIR)"


def test_output_failing_halfway_keeps_the_earlier_file(tmp_path, capsys):
    earlier = tmp_path / "out.md"
    earlier.write_text("earlier")
    os.chmod(earlier, 0o640)
    before = listing(tmp_path)
    with file_size_limit(64):  # the table is longer: its write fails with EFBIG
        code, out, err = cli(capsys, *VERBS["report"], "-o", str(earlier))
    assert (code, err) == (1, line("--output", earlier, "EFBIG"))
    assert listing(tmp_path) == before
    # and a whole write replaces it, its mode kept, nothing else left
    code, _, err = cli(capsys, *VERBS["report"], "-o", str(earlier))
    assert code == 0 and err == f"wrote {earlier}\n" and earlier.read_text().startswith("#")
    assert stat.S_IMODE(earlier.stat().st_mode) == 0o640 and [p.name for p in tmp_path.iterdir()] == ["out.md"]


def test_output_to_a_link_to_a_file_is_refused_and_the_file_kept(tmp_path, capsys):
    """Replacing the file a link names would pass by the kernel's own checks of links (a link
    planted in a shared /tmp): exit 1 naming the link; the file it names is as it was."""
    (tmp_path / "real.md").write_text("earlier")
    (tmp_path / "link.md").symlink_to("real.md")
    code, _, err = cli(capsys, *VERBS["report"], "-o", str(tmp_path / "link.md"))
    assert code == 1 and str(tmp_path / "link.md") in err and "symbolic link" in err, err
    assert (tmp_path / "link.md").is_symlink() and (tmp_path / "real.md").read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.md", "real.md"]


def test_output_to_a_character_device_is_written_to_it(tmp_path, capsys):
    """``-o /dev/null`` (and ``/dev/stdout``) keep working: a device is written, not replaced."""
    _device(tmp_path / "null", 3)
    code, _, err = cli(capsys, *VERBS["report"], "-o", str(tmp_path / "null"))
    assert code == 0 and err == f"wrote {tmp_path / 'null'}\n"
    assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode) and os.listdir(tmp_path) == ["null"]


# ----------------------------------------------------------------------------- report --plot


@pytest.mark.parametrize("kind", ["directory", "under_a_file", "fifo", "full_device"])
def test_plot_to_a_place_that_takes_no_file_is_one_line(kind, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path, errname, why = place(tmp_path, kind, "x.png")
    before = listing(tmp_path)
    code, out, err = cli(capsys, *VERBS["report"], "--plot", str(path))
    assert (code, err) == (1, line("--plot", path, errname, why)) and out.startswith("#")
    assert listing(tmp_path) == before


def test_plot_with_an_extension_matplotlib_does_not_write(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "x.badext"
    code, out, err = cli(capsys, *VERBS["report"], "--plot", str(path))
    assert (code, out) == (1, "")  # refused before any table
    assert err.startswith(f"accelctl: error: --plot: cannot write {path}: .badext is not a format matplotlib "
                          "writes (") and "png" in err and err.count("\n") == 1
    assert os.listdir(tmp_path) == []


def test_plot_without_an_extension_is_a_png_of_that_very_name(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code, _, err = cli(capsys, *VERBS["report"], "--plot", str(tmp_path / "nul"))
    assert code == 0 and err == f"wrote {tmp_path / 'nul'}\n"
    assert os.listdir(tmp_path) == ["nul"] and (tmp_path / "nul").read_bytes()[:8] == PNG


def test_plot_in_another_format_and_in_new_folders(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code, _, err = cli(capsys, *VERBS["report"], "--plot", str(tmp_path / "a" / "b" / "x.svg"))
    assert code == 0 and err == f"wrote {tmp_path / 'a' / 'b' / 'x.svg'}\n"
    assert b"<svg" in (tmp_path / "a" / "b" / "x.svg").read_bytes()[:400]


def test_plot_failing_halfway_keeps_the_earlier_file_and_makes_no_folder(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    earlier = tmp_path / "x.png"
    earlier.write_bytes(b"earlier")
    before = listing(tmp_path)
    with file_size_limit(1024):  # the PNG is larger: its write fails with EFBIG
        code, _, err = cli(capsys, *VERBS["report"], "--plot", str(earlier))
        assert (code, err) == (1, line("--plot", earlier, "EFBIG"))
        code, _, err = cli(capsys, *VERBS["report"], "--plot", str(tmp_path / "new" / "y.png"))
        assert (code, err) == (1, line("--plot", tmp_path / "new" / "y.png", "EFBIG"))
    assert listing(tmp_path) == before


# ----------------------------------------------------------------------------- init -o


@pytest.mark.parametrize("kind", ["directory", "fifo", "full_device"])
def test_init_force_to_a_place_that_takes_no_file_is_one_line(kind, tmp_path, capsys):
    path, errname, why = place(tmp_path, kind, "w.wl")
    before = listing(tmp_path)
    code, out, err = cli(capsys, "init", "bert", "-o", str(path), "--force")
    assert (code, out, err) == (1, "", line("init", path, errname, why))
    assert listing(tmp_path) == before


def test_init_force_replaces_an_earlier_file_whole(tmp_path, capsys):
    earlier = tmp_path / "w.wl"
    earlier.write_text("mine")
    os.chmod(earlier, 0o600)
    with file_size_limit(64):
        code, _, err = cli(capsys, "init", "bert", "-o", str(earlier), "--force")
    assert (code, err) == (1, line("init", earlier, "EFBIG")) and earlier.read_text() == "mine"
    assert cli(capsys, "init", "bert", "-o", str(earlier), "--force")[0] == 0
    assert "workload bert" in earlier.read_text() and stat.S_IMODE(earlier.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["w.wl"]

"""Run store faults (issue 11, #7): a run folder or summary that cannot be read is listed
as ``unreadable: <reason>`` by the store, ``accelctl runs``, ``report`` and ``compare``
(the TUI's run list: tests/tui/test_pilot.py), never a traceback, a hang or a bare
``incomplete``.

Every fault is real, on a copy of the report fixtures' runs: summary.json as a directory,
a FIFO (reading one would block for ever: it must never be opened), a symlink loop, bytes
that are not UTF-8, a truncated summary, an empty one, a JSON list.  Permission denied
(EACCES) is real too: the tests run as root, who reads anything, so those tests drop the
process's effective uid to ``nobody`` around the reads (``os.seteuid``; skipped when not
root) and a ``chmod 000`` run folder (or store) refuses them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from accelctl.cli import main
from accelctl.run import store

FIXTURES = Path(__file__).resolve().parents[1] / "report" / "fixtures" / "store"
GOOD = "20260101-000000-fixture_train-small-0001"
BROKEN = "20260101-000100-fixture_train-big-0002"
NOBODY = 65534


def _half(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _replace(make):
    def fault(p: Path) -> None:
        p.unlink()
        make(p)

    return fault


FAULTS = {
    "directory": (_replace(Path.mkdir), "summary.json is a directory"),
    "fifo": (_replace(os.mkfifo), "summary.json is a FIFO"),
    "symlink loop": (_replace(lambda p: p.symlink_to(p.name)), "summary.json: Too many levels of symbolic links"),
    "not utf-8": (lambda p: p.write_bytes(b'{"status": "ok", "workload": "\xff\xfe"}'), "summary.json is not UTF-8 text"),
    "truncated": (_half, "summary.json is truncated"),
    "empty": (lambda p: p.write_bytes(b""), "summary.json is empty"),
    "not an object": (lambda p: p.write_text("[1, 2]"), "summary.json is not a JSON object"),
}


@pytest.fixture
def runs(tmp_path):
    """Two fixture runs: GOOD and BROKEN (to be broken by the test)."""
    for name in (GOOD, BROKEN):
        shutil.copytree(FIXTURES / name, tmp_path / name)
    return tmp_path


def cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def faces(capsys, root: Path, reason: str) -> None:
    """``runs``, ``runs --json``, ``report``, ``report RUN`` and ``compare`` on a store
    whose BROKEN run is unreadable for ``reason``."""
    status = f"unreadable: {reason}"
    code, out, err = cli(capsys, "runs", "--runs-dir", str(root), "--json")
    listed = {r["id"]: r["status"] for r in json.loads(out)["result"]["runs"]}
    assert code == 0 and listed[GOOD] == "ok" and listed[BROKEN].startswith(status), (listed, err)

    code, out, err = cli(capsys, "runs", "--runs-dir", str(root), "--wide")  # --wide: full ids
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if BROKEN in line)
    rows = []  # the run's table row: its first line and the lines its cells wrap onto
    for line in lines[first:]:
        cells = line.split("│")[1:-1]
        if not cells or (rows and cells[0].strip()):
            break
        rows.append(cells)
    joined = [" ".join(c[col].strip() for c in rows).strip() for col in range(len(rows[0]))]
    assert code == 0 and joined[1:3] == ["fixture_train", "big"] and joined[3].startswith(status), out

    code, out, err = cli(capsys, "report", "--runs-dir", str(root), "--format", "csv")
    assert code == 0 and GOOD in out and BROKEN not in out
    assert f"accelctl: run {BROKEN} is {status}" in err and "(left out of the report)" in err

    code, out, err = cli(capsys, "report", BROKEN, "--runs-dir", str(root), "--format", "csv")
    assert code == 1 and f"run {BROKEN} is {status}" in err

    code, out, err = cli(capsys, "compare", GOOD, BROKEN, "--runs-dir", str(root))
    assert code == 2 and out == ""
    assert f"error[E226]: not compared: B ({BROKEN}) is {status}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_broken_summary_is_unreadable_with_its_reason_everywhere(runs, capsys, monkeypatch, fault):
    monkeypatch.setenv("COLUMNS", "250")  # rich: one line per run, the reason unwrapped
    make, reason = FAULTS[fault]
    make(runs / BROKEN / "summary.json")
    good, broken = sorted(store.list_runs(runs), key=lambda r: r.id)
    assert good.status == "ok" and not good.unreadable
    assert broken.status.startswith(f"unreadable: {reason}") and broken.unreadable.startswith(reason)
    # what can still be read is: the workload and target (from the run id: the fixtures have
    # no plan.json), the events for the TUI's replay
    assert (broken.workload, broken.target) == ("fixture_train", "big")
    assert broken.events() != []
    faces(capsys, runs, reason)


def test_a_folder_named_like_a_run_with_no_real_date_is_listed(runs):
    (runs / "20261399-250000-w-t-abcd").mkdir()
    rec = next(r for r in store.list_runs(runs) if r.id.startswith("20261399"))
    assert (rec.status, rec.started, rec.workload, rec.target) == ("incomplete", "", "w", "t")


def test_events_that_are_a_fifo_are_not_opened(runs):
    events = runs / BROKEN / store.EVENTS_FILE
    events.unlink()
    os.mkfifo(events)
    assert store.load_run(BROKEN, runs).events() == []  # returns at once: a FIFO would block a reader


# --------------------------------------------------------------------------- EACCES


@contextlib.contextmanager
def as_nobody():
    """The effective uid and gid of ``nobody`` (real EACCES for a root test process)."""
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def open_store():
    """A store ``nobody`` may enter (pytest's tmp_path is 0700 root), with GOOD and BROKEN."""
    if os.geteuid() != 0:
        pytest.skip("drops to uid nobody: needs root (as a user, chmod 000 alone gives EACCES)")
    root = Path(tempfile.mkdtemp(prefix="accelctl-eacces-"))
    root.chmod(0o755)
    for name in (GOOD, BROKEN):
        shutil.copytree(FIXTURES / name, root / name)
    # the code these tests reach, imported while root may still read the interpreter's files
    # (stdlib modules imported lazily: getpass, glob, _strptime)
    import getpass  # noqa: F401
    import glob  # noqa: F401
    import time

    time.strptime("2026", "%Y")
    import rich.console  # noqa: F401
    import rich.table  # noqa: F401
    import scipy.stats  # noqa: F401

    import accelctl.cli.report  # noqa: F401
    import accelctl.report.compare  # noqa: F401
    import accelctl.report.render  # noqa: F401
    import accelctl.report.tables  # noqa: F401
    yield root
    for p in (root, *root.iterdir()):
        p.chmod(0o755)
    shutil.rmtree(root)


def test_permission_denied_on_a_run_folder(open_store, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    (open_store / BROKEN).chmod(0o000)
    with as_nobody():
        with pytest.raises(PermissionError):  # the fault is real: the kernel refuses nobody
            (open_store / BROKEN / "summary.json").read_bytes()
        faces(capsys, open_store, "run folder: Permission denied")


def test_permission_denied_on_a_summary(open_store, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    (open_store / BROKEN / "summary.json").chmod(0o000)
    with as_nobody():
        faces(capsys, open_store, "summary.json: Permission denied")


def test_permission_denied_on_the_store_itself(open_store, capsys):
    open_store.chmod(0o000)
    with as_nobody():
        code, out, err = cli(capsys, "runs", "--runs-dir", str(open_store))
        assert code == 2 and f"cannot read the run store {open_store}: Permission denied" in err
        code, out, err = cli(capsys, "report", "--runs-dir", str(open_store))
        assert code == 2 and "Permission denied" in err and "Traceback" not in err


def test_run_files_of_an_unexpected_shape(runs, capsys):
    """Valid JSON of the wrong shape (hand-edited, another version's): named, not a traceback."""
    (runs / BROKEN / "summary.json").write_text('{"status": "ok", "stats": "fast"}')
    assert store.load_run(BROKEN, runs).status == "unreadable: summary.json: stats must be an object (got a string)"
    shutil.rmtree(runs / BROKEN)
    shutil.copytree(FIXTURES / BROKEN, runs / BROKEN)
    (runs / BROKEN / "spec.json").write_text('{"targets": "big", "task": []}')  # the summary is fine
    code, out, err = cli(capsys, "compare", GOOD, BROKEN, "--runs-dir", str(runs))
    assert code == 2 and f"B ({BROKEN}) is unreadable: spec.json: targets must be a list (got a string)" in err
    code, out, err = cli(capsys, "report", "--runs-dir", str(runs), "--format", "csv")
    assert code == 0 and GOOD in out and BROKEN not in out and f"run {BROKEN} is unreadable" in err

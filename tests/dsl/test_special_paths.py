"""Special paths where a workload file is expected (issue 22 item 4): a FIFO, /dev/zero, a
link to it, a symbolic link loop, a folder, ``ok.wl/x`` (ENOTDIR), a 300-character name
(ENAMETOOLONG), a file root cannot read (EACCES), a non-UTF-8 name, non-UTF-8 bytes, a
broken link, a socket, /dev/stdin on a pipe, a file over the 1 MiB cap.

Each is one positioned error for its path (``path: error[E00x]: ...``) from
``accelctl.dsl.source.read_source`` -- the one function that opens workload files -- and
never a hang, an unbounded read or a traceback: in process, and through every verb that
takes a workload path as a real ``accelctl`` process with a 10 s limit (the FIFO through
every verb in the fast tier; every path through every verb is ``slow``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.dsl import source
from accelctl.dsl.source import read_source
from accelctl.errors import WorkloadError

ROOT = Path(__file__).resolve().parents[2]
OK = (ROOT / "workloads" / "tiny_gpt2.wl").read_text(encoding="utf-8")
#: no command may take longer on any of these paths (the issue's bound for a hang)
HANG_S = 10

#: a FIFO, so it holds for tui too (a folder is a valid ``tui`` argument, a valid file opens the app)
NON_UTF8_NAME = os.fsdecode(b"fifo-\xff\xfe.wl")

#: write-only sysfs attributes: opening one for reading is EACCES even for root
WRITE_ONLY_SYSFS = ("/sys/bus/pci/rescan", "/sys/bus/pci/drivers_probe", "/sys/bus/platform/drivers_probe",
                    "/sys/devices/system/cpu/probe", "/sys/bus/cpu/drivers_probe")


def _unreadable(tmp: Path) -> Path | None:
    """A path whose open fails with EACCES for this user, or None."""
    if os.geteuid() != 0:
        f = tmp / "no-permission.wl"
        f.write_text(OK, encoding="utf-8")
        f.chmod(0)
        return f
    for candidate in WRITE_ONLY_SYSFS:
        try:
            os.close(os.open(candidate, os.O_RDONLY | os.O_NONBLOCK))
        except PermissionError:
            return Path(candidate)
        except OSError:
            continue
    return None


def _socket(tmp: Path) -> Path:
    path = tmp / "socket.wl"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))  # the socket file stays after the socket is closed
    return path


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def _made(tmp: Path) -> dict[str, tuple[Path | None, str]]:
    """Every special path, made under ``tmp``: name -> (path or None where this machine has
    none, the code its error must have)."""
    (tmp / "ok.wl").write_text(OK, encoding="utf-8")
    os.mkfifo(tmp / "fifo.wl")
    os.mkfifo(tmp / NON_UTF8_NAME)
    (tmp / "zero.wl").symlink_to("/dev/zero")
    (tmp / "loop.wl").symlink_to("loop.wl")
    (tmp / "broken.wl").symlink_to("nowhere.wl")
    (tmp / "folder.wl").mkdir()
    (tmp / "latin1.wl").write_bytes(b'workload w {\n  description = "caf\xe9"\n}\n')
    return {
        "fifo": (tmp / "fifo.wl", "E002"),
        "dev_zero": (Path("/dev/zero"), "E002"),
        "link_to_dev_zero": (tmp / "zero.wl", "E002"),
        "symlink_loop": (tmp / "loop.wl", "E002"),
        "folder": (tmp / "folder.wl", "E002"),
        "enotdir": (tmp / "ok.wl" / "x.wl", "E001"),
        "name_too_long": (tmp / ("n" * 300 + ".wl"), "E002"),
        "permission_denied": (_unreadable(tmp), "E002"),
        "non_utf8_name": (tmp / NON_UTF8_NAME, "E002"),
        "non_utf8_bytes": (tmp / "latin1.wl", "E002"),
        "broken_symlink": (tmp / "broken.wl", "E001"),
        "socket": (_socket(tmp), "E002"),
        "over_the_cap": (_sparse(tmp / "big.wl", source.MAX_SOURCE_BYTES + 1), "E004"),
        "dev_stdin_pipe": (Path("/dev/stdin"), "E002"),  # stdin is a pipe in ``_accelctl``
    }


CASES = ("fifo", "dev_zero", "link_to_dev_zero", "symlink_loop", "folder", "enotdir", "name_too_long",
         "permission_denied", "non_utf8_name", "non_utf8_bytes", "broken_symlink", "socket", "over_the_cap",
         "dev_stdin_pipe")
NO_EACCES = ("running as root, and no write-only sysfs attribute opens with EACCES here (root reads any "
             "file a mode forbids)")


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return _made(tmp_path_factory.mktemp("special"))


@pytest.fixture
def no_hang():
    """An in-process read that blocks (a FIFO opened without O_NONBLOCK) fails the test after
    ``HANG_S`` instead of hanging the suite (SIGALRM interrupts the blocked system call)."""
    import signal

    def hung(signum, frame):
        raise TimeoutError(f"still reading after {HANG_S} s")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, before)


def _case(paths, name: str) -> tuple[Path, str]:
    path, code = paths[name]
    if path is None:
        pytest.skip(NO_EACCES)
    return path, code


# ----------------------------------------------------------------------------- in process


@pytest.mark.parametrize("name", [c for c in CASES if c != "dev_stdin_pipe"])  # pytest's stdin is not ours
def test_read_source_refuses_it_with_one_diagnostic_for_the_path(paths, name, no_hang):
    path, code = _case(paths, name)
    with pytest.raises(WorkloadError) as info:
        read_source(path)
    (d,) = info.value.diagnostics
    assert d.code == code and d.path == str(path) and d.hint
    assert d.render().startswith(f"{path}:") and f"error[{code}]" in d.render().splitlines()[0]


class _Os:
    """``os`` as ``accelctl.dsl.source`` sees it, recording each ``open``; ``stat`` may lie
    (``stat_says``) as a path replaced between the ``stat`` and the ``open`` would."""

    def __init__(self, stat_says: os.stat_result | None = None):
        self.opened: list[tuple] = []
        self.stat_says = stat_says

    def __getattr__(self, name):
        return getattr(os, name)

    def open(self, *args):
        self.opened.append(args)
        return os.open(*args)

    def stat(self, path):
        return self.stat_says or os.stat(path)


def test_a_fifo_is_refused_without_being_opened(paths, monkeypatch, no_hang):
    """Opening a FIFO for reading blocks until a writer comes (without O_NONBLOCK): the path's
    stat refuses it first.  A FIFO swapped in between the stat and the open is refused by the
    ``fstat`` of what was opened, and that open does not block (``O_NONBLOCK``)."""
    fifo = paths["fifo"][0]
    monkeypatch.setattr(source, "os", spy := _Os())
    with pytest.raises(WorkloadError):
        read_source(fifo)
    assert spy.opened == []
    monkeypatch.setattr(source, "os", spy := _Os(stat_says=os.stat(fifo.parent / "ok.wl")))
    with pytest.raises(WorkloadError) as info:
        read_source(fifo)
    assert "FIFO" in info.value.diagnostics[0].message
    assert len(spy.opened) == 1 and spy.opened[0][1] & os.O_NONBLOCK


def test_a_file_that_holds_more_than_its_size_says_is_cut_at_the_cap(monkeypatch):
    """A regular file whose size says less than it holds (``/proc`` files say 0; a file may grow
    between the stat and the read) is read up to the cap plus one byte, then refused (E004)."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists() or os.stat(smaps).st_size != 0:
        pytest.skip("no /proc/self/smaps of size 0 here")
    monkeypatch.setattr(source, "MAX_SOURCE_BYTES", 1000)  # smaps of a Python process: tens of KB
    with pytest.raises(WorkloadError) as info:
        read_source(smaps)
    (d,) = info.value.diagnostics
    assert d.code == "E004" and "holds more than 1,000 bytes" in d.message, d.message


def test_a_regular_file_through_dev_stdin_is_read(tmp_path):
    """``/dev/stdin`` redirected from a workload file is that regular file: it validates."""
    f = tmp_path / "ok.wl"
    f.write_text(OK, encoding="utf-8")
    with f.open("rb") as stdin:
        cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "validate", "/dev/stdin"], stdin=stdin,
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert cp.returncode == 0 and "1 file(s)" in cp.stdout, cp.stderr


# ----------------------------------------------------------------------------- through the CLI


def _accelctl(*args, cwd: Path = ROOT, runs: Path | None = None) -> tuple[int, str, str, float]:
    """A real ``accelctl`` process, stdin a pipe left open: (exit code, stdout, stderr, seconds);
    a process still running after ``HANG_S`` fails the test (and is killed)."""
    import time

    # a UTF-8 terminal's streams: stdout strict, stderr backslashreplace (a name that is not
    # UTF-8 printed on stdout would be a UnicodeEncodeError)
    env = {**os.environ, "ACCELCTL_RUNS_DIR": str(runs or cwd / "runs"), "LC_ALL": "C.UTF-8"}
    env.pop("PYTHONIOENCODING", None)
    t0 = time.monotonic()
    with subprocess.Popen([sys.executable, "-m", "accelctl.cli", *map(os.fspath, args)], cwd=cwd, env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            out, err = proc.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"accelctl {' '.join(map(os.fspath, args))!r} still running after {HANG_S} s")
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.monotonic() - t0


def _shown(path: Path) -> str:
    """The path as stderr shows it (a name that is not UTF-8 backslash-escaped)."""
    return os.fspath(path).encode("utf-8", "backslashreplace").decode("utf-8")


def _positioned(text: str, path: Path, code: str) -> bool:
    """``text`` has the error line of ``path``: ``path: error[CODE]`` or ``path:L:C: error[CODE]``."""
    return re.search(rf"^{re.escape(_shown(path))}(:\d+:\d+)?: error\[{code}\]", text, re.M) is not None


#: verb -> (its arguments around the path, whether it reports the path's error: completion does not)
VERBS = {
    "validate": (("validate", "{}"), True),
    "validate --json": (("validate", "--json", "{}"), True),
    "plan": (("plan", "{}"), True),
    "plan -f sh": (("plan", "{}", "-f", "sh"), True),
    "estimate": (("estimate", "{}"), True),
    "run": (("run", "{}", "--headless"), True),
    "sweep": (("sweep", "{}", "--target", "cpu"), True),
    "doctor --plan": (("doctor", "--plan", "{}"), True),
    "tui": (("tui", "{}"), True),
    "complete targets": (("__complete", "targets", "{}"), False),
    "complete workloads": (("__complete", "workloads", "{}"), False),
}


def _check_verb(verb: str, path: Path, code: str, tmp: Path) -> None:
    words, reports = VERBS[verb]
    args = [path if w == "{}" else w for w in words]
    rc, out, err, seconds = _accelctl(*args, runs=tmp / "runs")
    said = f"accelctl {verb} {_shown(path)!r}: exit {rc} in {seconds:.1f} s\n{err[-3000:]}"
    assert "Traceback" not in err + out and rc != 70, said
    if not reports:  # completion: nothing offered, exit 0, nothing on stderr
        assert (rc, out, err) == (0, "", ""), said
        return
    assert rc == 1, said
    if verb == "validate --json":
        import json

        (diag,) = json.loads(out)["diagnostics"]
        assert diag["code"] == code and diag["path"] == os.fspath(path), said
    else:
        assert _positioned(err, path, code), said
    assert not (tmp / "runs").exists(), said  # nothing started, nothing stored


def test_validate_reports_every_special_path_and_validates_the_rest(paths, tmp_path):
    """``validate bad.wl loop ok.wl``: one process, every special path its own positioned error,
    ok.wl still validated, exit 1, no traceback, no hang."""
    ok = paths["folder"][0].parent / "ok.wl"
    bad = tmp_path / "bad.wl"
    bad.write_text("workload w {\n", encoding="utf-8")
    here = [(p, c) for p, c in (paths[n] for n in CASES) if p is not None]
    rc, out, err, _ = _accelctl("validate", bad, *(p for p, _ in here), ok)
    assert rc == 1 and "Traceback" not in err, err[-3000:]
    for p, c in [(bad, "E101"), *here]:
        assert _positioned(err, p, c), f"{p}: {c}\n{err[-3000:]}"
    assert f"{len(here) + 1} of {len(here) + 2} file(s) invalid" in out, out
    assert not _positioned(err, ok, r"E\d+")


def test_estimate_reports_a_special_path_and_estimates_the_other_files(paths, tmp_path):
    ok = paths["folder"][0].parent / "ok.wl"
    fifo, code = paths["fifo"]
    rc, out, err, _ = _accelctl("estimate", fifo, ok, runs=tmp_path / "runs")
    assert rc == 1 and "Traceback" not in err, err[-3000:]
    assert _positioned(err, fifo, code), err[-3000:]
    assert "tiny_gpt2" in out  # ok.wl's workloads, estimated


@pytest.mark.parametrize("verb", ["validate", "validate --json", "plan -f sh", "estimate", "complete targets"])
def test_a_valid_workload_with_a_name_that_is_not_utf8_goes_through(verb, tmp_path):
    """A name that is not UTF-8 (argv decodes it with surrogates) is read, and printed wherever
    the verb prints it, on a UTF-8 terminal's streams: no UnicodeEncodeError."""
    path = tmp_path / os.fsdecode(b"ok-\xff.wl")
    path.write_text(OK, encoding="utf-8")
    words, _ = VERBS[verb]
    rc, out, err, _ = _accelctl(*[path if w == "{}" else w for w in words], runs=tmp_path / "runs")
    assert rc == 0 and "Traceback" not in err, err[-3000:]
    assert out.strip()  # a summary, a plan, an estimate, the targets


@pytest.mark.parametrize("name", ["fifo", "dev_zero", "symlink_loop", "name_too_long"])
def test_run_file_resume_refuses_a_special_workload_file(paths, name, tmp_path, no_hang):
    """``accelctl run FILE --resume ID`` compares FILE with the run's stored workload.wl: a special
    FILE is refused with why (``RunError``), never read or waited on."""
    from accelctl.errors import RunError
    from accelctl.run.supervision.resume import check_workload_unchanged

    path, code = _case(paths, name)
    run_dir = tmp_path / "20250101-000000-w-cpu-abcd"
    run_dir.mkdir()
    (run_dir / "workload.wl").write_text(OK, encoding="utf-8")
    with pytest.raises(RunError) as info:
        check_workload_unchanged(run_dir, path)
    assert "cannot read its workload file" in str(info.value)


@pytest.mark.parametrize("verb", VERBS)
def test_a_fifo_through_every_verb(paths, verb, tmp_path):
    """The hang the issue found (``validate`` on a FIFO), through every verb that takes a
    workload path."""
    _check_verb(verb, *_case(paths, "fifo"), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [c for c in CASES if c != "fifo"])
@pytest.mark.parametrize("verb", VERBS)
def test_every_special_path_through_every_verb(paths, verb, name, tmp_path):
    if verb == "tui" and name == "folder":
        pytest.skip("a folder is what tui takes (its .wl files)")
    _check_verb(verb, *_case(paths, name), tmp_path)

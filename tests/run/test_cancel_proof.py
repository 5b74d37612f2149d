"""``cancel`` signals a process only when it is proven to be the run's (``accelctl.run.store.proof``):
a run folder whose ``runner.json`` names the process group -- or the very pid and start time --
of an unrelated process, of this boot or of another, gets that process left alone; a folder
the store calls unreadable, or one outside the store, has nothing to kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_checkpoint_resume import CPU_WORKLOAD, stored_run

from accelctl import exitcodes
from accelctl.contract import supervision
from accelctl.run import store

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def accelctl(*argv: str, runs: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *argv, "--runs-dir", str(runs)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def bystander():
    """An unrelated process leading a session and a process group of its own (``setsid sleep``)."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def _forge_runner(run_dir: Path, runner: str, pgid: int, boot: str | None = None) -> None:
    here = store._host()
    (run_dir / store.RUNNER_FILE).write_text(json.dumps({
        "runner": runner, "host": {"name": here["name"], "boot_id": boot or here["boot_id"]},
        "started_unix_s": time.time(), "pgids": [pgid]}))


@pytest.mark.parametrize("case", ["the group, another boot, no plan.json", "the group, this boot, no plan.json",
                                  "the group, this boot, a readable run", "its pid and start time as the runner",
                                  "its pid and start time, another boot"])
def test_cancel_never_signals_a_process_a_forged_runner_json_names(tmp_path, bystander, case):
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    if "no plan.json" in case:
        (run_dir / store.PLAN_FILE).unlink()
    ident = supervision.identity(bystander.pid) if "pid and start time" in case else "1:1"
    _forge_runner(run_dir, ident, bystander.pid, "0" * 32 if "another boot" in case else None)
    done = accelctl("cancel", run_dir.name, "--timeout", "3", runs=tmp_path / "runs")
    assert bystander.poll() is None, "the unrelated process was signalled"
    assert "Traceback" not in done.stderr
    if "no plan.json" in case:
        assert done.returncode == exitcodes.FAILED and "nothing was signalled" in done.stderr, done
        assert "plan.json is missing" in done.stderr
    else:  # a lost run (its runner gone, of another boot, or alive but not holding the folder's lock)
        assert store.read_run(run_dir).status == "not started (runner lost)"  # runs, status, rm agree
        assert done.returncode == 0 and "had already ended: not started (runner lost)" in done.stdout, done
        status = accelctl("status", run_dir.name, runs=tmp_path / "runs")
        assert "running" not in status.stdout, status
        removed = accelctl("runs", "rm", run_dir.name, runs=tmp_path / "runs")
        assert removed.returncode == 0 and not run_dir.exists(), removed  # not kept as "in progress"


def test_a_run_argument_outside_the_store_is_refused_and_nothing_is_signalled(tmp_path, bystander):
    """A copy of a run folder outside the store lists the bystander: refused by name (exit 2)."""
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    _forge_runner(run_dir, supervision.identity(bystander.pid), bystander.pid)
    outside = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(run_dir), str(outside)], check=True)
    for verb in (("cancel",), ("status",), ("logs",), ("report",), ("runs", "rm"), ("attach",)):
        done = accelctl(*verb, str(outside), runs=tmp_path / "runs")
        assert done.returncode == exitcodes.USAGE, (verb, done)
        assert f"is not a run of the run store {tmp_path / 'runs'}" in done.stderr, (verb, done.stderr)
    status = accelctl("status", "../copy", "--json", runs=tmp_path / "runs")
    assert status.returncode == exitcodes.USAGE and json.loads(status.stdout)["result"] == {}
    assert bystander.poll() is None and outside.is_dir()


def test_an_empty_run_argument_names_no_run(tmp_path):
    """``status ''`` is a RUN that names nothing, as for every other verb: exit 2 naming the
    store, never the list of the runs in progress."""
    stored_run(tmp_path, CPU_WORKLOAD)
    for verb in ("status", "cancel", "logs"):
        done = accelctl(verb, "", runs=tmp_path / "runs")
        assert done.returncode == exitcodes.USAGE, (verb, done)
        assert f"no run '' in the run store {tmp_path / 'runs'}" in done.stderr, (verb, done.stderr)


def _other_hex(run_dir: Path) -> str:
    """A run id's last part that differs from ``run_dir``'s from its first character on."""
    return next(h for h in ("beef", "cafe") if h[0] != run_dir.name[-4])


def _lock_holder(lock: Path, write_pid: int | None = None) -> subprocess.Popen:
    """A process holding ``lock`` exclusively (as a run's supervisor holds its ``owner.lock``),
    the pid ``write_pid`` (its own by default) written in it."""
    code = ("import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.ftruncate(fd, 0); os.write(fd, (sys.argv[2] or str(os.getpid())).encode())\n"
            "print('held', flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(lock), str(write_pid or "")], stdout=subprocess.PIPE,
                            start_new_session=True, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("case", ["a copy whose owner.lock is a hard link to a live run's",
                                  "a live run's supervisor pid written in a lock another process holds"])
def test_cancel_of_a_copied_or_forged_folder_leaves_the_live_run_alone(tmp_path, case):
    """The live run's supervisor (here a process holding run A's ``owner.lock``, recorded in A's
    ``runner.json``) is proven A's only: a folder B that shares A's lock file by a hard link
    (``cp -al``, ``rsync --link-dest``), or whose lock names A's supervisor while another process
    holds it, gets nothing signalled -- and ``cancel`` does not wait for that lock's holder."""
    a = stored_run(tmp_path, CPU_WORKLOAD)
    supervisor = _lock_holder(a / "owner.lock")
    others = []
    try:
        _forge_runner(a, supervision.identity(supervisor.pid), supervisor.pid)
        b = a.with_name(a.name[:-4] + _other_hex(a))
        subprocess.run(["cp", "-a", str(a), str(b)], check=True)
        (b / "owner.lock").unlink()
        if "hard link" in case:
            os.link(a / "owner.lock", b / "owner.lock")
        else:
            (b / "owner.lock").write_text(str(supervisor.pid))
            others.append(_lock_holder(b / "owner.lock", write_pid=supervisor.pid))
        started = time.monotonic()
        done = accelctl("cancel", b.name, "--timeout", "30", runs=tmp_path / "runs")
        assert supervisor.poll() is None, "the live run's supervisor was signalled"
        assert all(o.poll() is None for o in others)
        assert done.returncode == exitcodes.FAILED and "nothing was signalled" in done.stderr, done
        assert time.monotonic() - started < 20
    finally:
        for proc in (supervisor, *others):
            proc.kill()
            proc.wait(timeout=10)


def test_a_link_in_the_store_named_like_a_run_is_no_run(tmp_path, bystander):
    """A symbolic link in the store, named like a run id, to a run folder elsewhere (its
    ``runner.json`` naming the bystander): no verb takes it, by id, prefix or path."""
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    _forge_runner(run_dir, supervision.identity(bystander.pid), bystander.pid)
    outside = tmp_path / "elsewhere"
    subprocess.run(["cp", "-a", str(run_dir), str(outside)], check=True)
    link = run_dir.with_name(run_dir.name[:-4] + _other_hex(run_dir))
    link.symlink_to(outside)
    for name in (link.name, link.name[:-3], str(link)):  # the id, a prefix only it has, the path
        for verb in (("cancel",), ("status",), ("logs",), ("report",)):
            done = accelctl(*verb, name, runs=tmp_path / "runs")
            assert done.returncode == exitcodes.USAGE, (verb, name, done)
    listed = accelctl("runs", "--json", runs=tmp_path / "runs")
    assert link.name not in listed.stdout and run_dir.name in listed.stdout
    assert bystander.poll() is None


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (whichever of its threads forked them)."""
    import psutil

    try:
        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
def test_cancel_ends_the_supervisor_the_launcher_every_rank_and_their_compilers(tmp_path, bystander):
    """A detached 2-rank torchrun run with ``optimize { compile = on }``, cancelled while its ranks
    compile (inductor's C++ compilers, children of the ranks, in the ranks' own sessions): every
    one of those processes ends, and the bystander, listed in nothing, is left alone."""
    wl = tmp_path / "c.wl"
    wl.write_text((ROOT / "workloads" / "ddp_cpu.wl").read_text().split("# The same model")[0]
                  .replace("steps = 10 steps", "steps = 5000 steps")
                  .replace("  precision fp32\n", "  precision fp32\n  optimize { compile = on }\n"))
    runs = tmp_path / "runs"
    env = {**ENV, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    started = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "--detach", "--runs-dir",
                              str(runs)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    run_id = started.stdout.strip()
    assert store.is_run_id(run_id), started
    supervisor = int(json.loads((runs / run_id / store.RUNNER_FILE).read_text())["runner"].split(":")[0])
    deadline, seen = time.monotonic() + 240, []
    while time.monotonic() < deadline:  # until a rank has a compiler running under it
        tree = _tree(supervisor)
        compilers = [p for p in tree if _cmdline(p).split(" ", 1)[0].endswith(("g++", "c++", "gcc", "cc1plus"))]
        if compilers:
            seen = tree
            break
        time.sleep(0.05)
    assert seen, "no compiler under the run's ranks"
    ranks = [p for p in seen if "-m accelctl.worker" in _cmdline(p) and "torch.distributed.run" not in _cmdline(p)]
    launcher = [p for p in seen if "torch.distributed.run" in _cmdline(p)]
    assert len(ranks) == 2 and len(launcher) == 1, [_cmdline(p)[:80] for p in seen]
    done = accelctl("cancel", run_id, runs=runs)
    assert done.returncode == 0 and "cancelled: stopped; no process of it is left" in done.stdout, done
    left = [p for p in seen if _alive(p)]
    assert left == [], [(p, _cmdline(p)[:80]) for p in left]
    assert bystander.poll() is None


def test_runs_gc_takes_no_viewer_folder_of_another_user_or_a_fifo_note(tmp_path, monkeypatch):
    """The viewers' console folders sit in a shared $TMPDIR: one of another user's naming this
    store is never taken for ours (``runs gc`` would remove it), and a FIFO as its note is never
    waited on."""
    import tempfile

    from accelctl.run.store import consoles

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runs = tmp_path / "runs"
    runs.mkdir()
    mine, fifo, theirs = (tmp_path / f"{consoles.VIEWER_PREFIX}{n}" for n in ("mine", "fifo", "theirs"))
    for folder in (mine, fifo, theirs):
        folder.mkdir()
    for folder in (mine, theirs):
        (folder / consoles.STORE_NOTE).write_text(str(runs.resolve()), encoding="utf-8")
    os.mkfifo(fifo / consoles.STORE_NOTE)
    if os.geteuid() == 0:
        os.chown(theirs, 65534, 65534)
        assert consoles.viewer_folders(runs) == [mine]
    else:
        assert consoles.viewer_folders(runs) == [mine, theirs]


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_logs_of_a_worker_log_that_is_no_regular_file_says_so(tmp_path, kind):
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    log = run_dir / store.LOG_FILE
    log.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(log)
    else:
        log.symlink_to("/etc/hostname")
    done = accelctl("logs", run_dir.name, runs=tmp_path / "runs")
    assert done.returncode == exitcodes.FAILED and "worker.log" in done.stderr and "not read" in done.stderr, done
    assert done.stdout == ""


def test_logs_of_a_log_without_newlines_comes_in_bounded_pieces(tmp_path):
    """A progress bar rewriting itself with ``\\r`` writes no newline: ``logs`` hands the bytes
    out in pieces of at most two ``MAX_LINE`` (a chunk read past a full piece), all of them, in
    order, never the whole file at once."""
    from accelctl.run.tail import MAX_LINE, JsonlTail

    log = tmp_path / "worker.log"
    body = b"first\n" + b"\r step 12345" * (MAX_LINE // 4) + b"\nlast"
    log.write_bytes(body)
    tail = JsonlTail(log)
    pieces = list(tail.each_line(final=True))
    tail.close()
    assert pieces[0] == b"first" and pieces[-1] == b"last"
    assert max(map(len, pieces)) <= 2 * MAX_LINE and len(pieces) > 3
    assert b"".join(pieces[1:-1]) == body[len(b"first\n"):-len(b"\nlast")]
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    (run_dir / store.LOG_FILE).write_bytes(body)
    done = subprocess.run([sys.executable, "-m", "accelctl.cli", "logs", run_dir.name, "--runs-dir",
                           str(tmp_path / "runs")], cwd=ROOT, env=ENV, capture_output=True, timeout=120)
    assert done.returncode == 0 and done.stdout.replace(b"\n", b"") == body.replace(b"\n", b"")


def test_what_a_launch_and_a_supervisor_put_on_pythonpath_holds_this_accelctl():
    """The folder the runner and ``run --detach`` put first on ``PYTHONPATH`` (so any cwd imports
    this accelctl, installed or not) is the one that holds the package, wherever the module sits."""
    import inspect

    from accelctl.run.supervision import commands, detach

    assert (Path(commands._PACKAGE_PARENT) / "accelctl" / "__init__.py").is_file()
    source = inspect.getsource(detach.spawn)
    depth = int(source.split("Path(__file__).resolve().parents[", 1)[1].split("]", 1)[0])
    assert (Path(detach.__file__).resolve().parents[depth] / "accelctl" / "__init__.py").is_file()

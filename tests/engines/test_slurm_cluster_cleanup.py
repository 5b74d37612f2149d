"""The local Slurm cluster of the engine tests ends with the pytest that started it, also when
that pytest is SIGKILLed (no teardown runs): a tiny pytest session brings the cluster up with
``conftest.slurm_cluster``, is SIGKILLed, and none of that cluster's daemons may be left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import slurm_missing

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent

TINY = '''
import sys, time
from pathlib import Path
sys.path.insert(0, {here!r})
from conftest import slurm_cluster  # noqa: F401 - the fixture under test


def test_up(slurm_cluster):
    Path({mark!r}).write_text(str(slurm_cluster.root))
    time.sleep(600)
'''


def _daemons_of(root: str) -> dict[int, str]:
    """pid -> command line of every process whose command line names ``root`` (the cluster's
    slurm.conf, munge socket)."""
    found = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if root in cmd and any(n in cmd for n in ("munged", "slurmctld", "slurmd")):
                found[int(d.name)] = cmd.strip()
    return found


def test_a_sigkilled_pytest_leaves_no_daemon_of_its_cluster(tmp_path):
    if reason := slurm_missing():
        pytest.skip(reason)
    mark = tmp_path / "up"
    (tmp_path / "test_tiny.py").write_text(TINY.format(here=str(HERE), mark=str(mark)))
    tiny = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                             str(tmp_path), "-c", os.devnull, str(tmp_path / "test_tiny.py")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    root = ""
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert tiny.poll() is None, tiny.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "the tiny session's cluster did not come up in 120 s"
            time.sleep(0.2)
        root = mark.read_text()
        started = _daemons_of(root)
        assert sum("slurmd " in c for c in started.values()) == 2 and any("slurmctld" in c for c in started.values()), \
            started
        tiny.send_signal(signal.SIGKILL)
        tiny.wait()
        deadline = time.monotonic() + 15
        while _daemons_of(root) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _daemons_of(root)
        assert not left, f"left running after the pytest that started them was SIGKILLed: {left}"
    finally:
        if tiny.poll() is None:
            tiny.kill()
            tiny.wait()
        for pid in _daemons_of(root) if root else ():  # what a failing run left: ended here, by pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if root:
            shutil.rmtree(root, ignore_errors=True)

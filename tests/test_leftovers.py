"""tests/leftovers.py: what a slow test leaves running is found by its token and ended."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
from leftovers import TOKEN_ENV, end_left

#: starts ``sleep`` in a session of its own and exits: the sleeper is left to init, as a run's
#: supervisor is once its viewer was SIGKILLed
ORPHAN = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
          "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)")


def _orphan(token: str) -> int:
    out = subprocess.run([sys.executable, "-c", ORPHAN], env={**os.environ, TOKEN_ENV: token}, capture_output=True,
                         text=True, check=True, timeout=30)
    return int(out.stdout)


def test_a_process_left_to_init_is_found_by_its_token_and_ended_and_one_pytest_holds_is_not():
    stray = _orphan("left-1")
    other = _orphan("another-test")
    held = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            env={**os.environ, TOKEN_ENV: "left-1"})  # a fixture's run: pytest still holds it
    try:
        left = end_left("left-1", grace_s=1.0)
        assert len(left) == 1 and left[0].startswith(f"{stray} "), left
        assert not psutil.pid_exists(stray) or psutil.Process(stray).status() == psutil.STATUS_ZOMBIE  # SIGTERM
        assert held.poll() is None  # held by this process: not its to end
        assert psutil.pid_exists(other) and psutil.Process(other).status() != psutil.STATUS_ZOMBIE  # another token's
        assert end_left("nothing-here") == []
    finally:
        held.kill()
        held.wait()
        for pid in (stray, other):
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass

"""tests/leftovers.py: what a slow test leaves running is found by its token and ended."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
from leftovers import TOKEN_ENV, end_left


def test_a_process_left_in_a_session_of_its_own_is_found_by_its_token_and_ended():
    env = {**os.environ, TOKEN_ENV: "left-1"}
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env,
                             start_new_session=True)  # as a run's supervisor: not in the test's group
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"], env=env)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             env={**os.environ, TOKEN_ENV: "another-test"}, start_new_session=True)
    try:
        left = end_left("left-1", grace_s=2.0)
        assert len(left) == 1 and left[0].startswith(f"{stray.pid} "), left  # quick ended by itself
        assert stray.wait(timeout=10) == -15  # SIGTERM to its group
        assert psutil.pid_exists(other.pid) and other.poll() is None  # another token's: untouched
        assert end_left("nothing-here") == []
    finally:
        for proc in (stray, quick, other):
            if proc.poll() is None:
                proc.kill()
            proc.wait()

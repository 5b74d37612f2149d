"""The local Slurm cluster's watchdog: ends the daemons' sessions when the pytest that started
them ends, however it ends (SIGKILL, a CI timeout, a crash), where the fixture's teardown
cannot run.

Started by ``conftest.slurm_cluster`` in a session of its own (a signal to pytest's process
group does not reach it), with a pipe as its stdin whose only writer is that pytest: each
line ``<pgid>`` names a daemon's session (each daemon leads its own: ``start_new_session``);
``forget`` means the teardown ended them itself.  End of file without ``forget`` -- the pytest
is gone -- and each session gets SIGTERM, then SIGKILL after ``GRACE_S``; the cluster's folder
(argv[1]) is removed and it exits.
"""

from __future__ import annotations

import shutil
import signal
import sys
import time

from accelctl.run.procgroup import group_alive, signal_group

GRACE_S = 5.0


def main() -> int:
    sessions: list[int] = []
    for line in sys.stdin:
        word = line.strip()
        if word == "forget":
            return 0
        if word.isdigit():
            sessions.append(int(word))
    for pgid in reversed(sessions):  # the slurmds, the controller, then munged
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while any(group_alive(g) for g in sessions) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pgid in sessions:
        signal_group(pgid, signal.SIGKILL)
    if len(sys.argv) > 1:
        shutil.rmtree(sys.argv[1], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

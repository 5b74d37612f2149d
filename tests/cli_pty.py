"""Drive ``accelctl`` in a real pseudo-terminal: its raw output (escape codes kept), keys
typed once a marker shows, its exit status.  For the CLI habits that depend on a terminal
(NO_COLOR, bare ``accelctl``)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
#: SGR parameters that set a colour: 30-37, 39, 40-47, 49, 90-97, 100-107, 38;..., 48;...
COLOUR_SGR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def in_pty(argv: list[str], *, columns: int = 80, rows: int = 24, env: dict | None = None, cwd: Path = ROOT,
           keys: bytes = b"", after: bytes = b"", timeout: float = 120.0, stdin_tty: bool = True) -> tuple[int, bytes]:
    """Run ``accelctl ARGV`` with stdin (unless not ``stdin_tty``: /dev/null), stdout and
    stderr on a ``columns`` x ``rows`` pseudo-terminal; once ``after`` has shown, type
    ``keys``.  (exit status, raw output)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    base.update({"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **(env or {})})
    proc = subprocess.Popen([sys.executable, "-m", "accelctl.cli", *argv], cwd=cwd, env=base,
                            stdin=slave if stdin_tty else subprocess.DEVNULL,
                            stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out, typed, deadline = b"", not keys, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not data:
                    break
                out += data
            if not typed and after in out:
                time.sleep(0.5)  # let the app settle before the key
                os.write(master, keys)
                typed = True
        return proc.wait(timeout=max(1.0, deadline - time.monotonic())), out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)

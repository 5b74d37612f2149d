"""A foreground ``accelctl run FILE`` is start + attach: the supervisor is the one ``run --detach``
starts (``detach.spawn``), and this process only views it, copying its console stream and stderr
as they are written until it ends, then exiting with its status.

SIGINT or SIGTERM stops the run (as ``accelctl cancel`` does) and the viewer copies on until the
supervisor has ended (exit 130); SIGHUP only detaches, the run goes on (exit 130); so does a
stdout reader that went away (exit 141).  Imports nothing heavy: the viewer reads two files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from accelctl import exitcodes
from accelctl.run import store
from accelctl.run.store import consoles
from accelctl.run.supervision import batch, detach

#: the longest the viewer waits between two copies of the console stream: the supervisor's end
#: and a signal wake it at once (a pidfd and a self-pipe), so this is only the stream's lag
POLL_S = 0.2


@dataclass
class Viewed:
    """How viewing ended: the exit status; ``detached`` (the run goes on without this viewer) and
    why; the supervisor's pid, its first run's id, and with ``--json`` its document."""

    code: int
    pid: int
    detached: str = ""
    run_id: str | None = None
    document: dict[str, Any] = field(default_factory=dict)
    #: the signal that killed the supervisor (SIGKILL: the run is found lost), or None
    killed_by: str | None = None
    #: the supervisor's console stream (left in place once the viewer has detached)
    console: Path | None = None


#: a viewer still there this long after a hang-up ends itself (exit 130): the run goes on under its
#: supervisor.  Seen once: ``accelctl tui`` hung up by tmux was still asleep, its supervisor a zombie,
#: after its run had ended (tests/tui/test_e2e_tmux.py), its display never giving the process back
HANGUP_EXIT_S = 15.0


class Signals:
    """SIGINT and SIGTERM ask for a stop, SIGHUP for a detach; the previous handlers come back
    at the end (``accelctl.cli.main`` is also called in-process)."""

    def __init__(self) -> None:
        self.stop = self.hangup = False
        self.saved: dict[int, Any] = {}
        #: a byte is written to ``wake[1]`` at each of these signals: a viewer waiting on
        #: ``wake[0]`` (``wait_exit``) acts on it at once
        self.wake: tuple[int, int] | None = None

    def __enter__(self) -> Signals:
        self.wake = os.pipe()
        for fd in self.wake:
            os.set_blocking(fd, False)
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, self._stop)
            self.saved[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._hangup)
        except ValueError:  # not the main thread: no handler of ours; a caller's Ctrl-C stays its own
            pass
        return self

    def _stop(self, signum, frame) -> None:
        self.stop = True
        self._wake()

    def _wake(self) -> None:
        try:
            if self.wake is not None:
                os.write(self.wake[1], b"\0")
        except OSError:  # the pipe is full: a wake-up is already waiting
            pass

    def _hangup(self, signum, frame) -> None:
        self._wake()
        if not self.hangup:  # a viewer whose terminal is gone leaves, whatever its display does
            import threading

            timer = threading.Timer(HANGUP_EXIT_S, os._exit, (exitcodes.STOPPED,))
            timer.daemon = True
            timer.start()
        self.hangup = True

    def __exit__(self, *exc) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        if self.wake is not None:
            for fd in self.wake:
                os.close(fd)
            self.wake = None


class _Copy:
    """The bytes written to ``path`` since the last call, onto ``stream`` (as they are: the
    supervisor's own lines, partial ones included)."""

    def __init__(self, path: Path | None, stream) -> None:
        self.file: BinaryIO | None = open(path, "rb") if path is not None else None  # noqa: SIM115
        self.stream = stream

    def __call__(self) -> None:
        data = self.file.read() if self.file is not None else b""
        if data and self.stream is not None:
            out = getattr(self.stream, "buffer", None)
            self.stream.flush()
            if out is not None:
                out.write(data)
                out.flush()
            else:
                self.stream.write(data.decode("utf-8", "replace"))
                self.stream.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def run(runs: batch.Batch, root) -> Viewed:
    """Start the supervisor of ``runs`` and view it (with ``runs.json`` its document is read back
    into ``Viewed.document``)."""
    json_document = runs.json
    base = store.runs_root(root)
    before = set(os.listdir(base)) if base.is_dir() else set()
    with Signals() as signals:  # from before the start: a Ctrl-C meanwhile stops the run it starts
        # the console files out of the store: a full store must not stop the supervisor's prints
        spawned = detach.spawn(batch.encode(runs), root, split=True, folder=consoles.viewer_folder(root))
        # with --json the supervisor's stdout is its document alone (read at the end), its stream on stderr
        out = _Copy(spawned.console, None if json_document else sys.stdout)
        err = _Copy(spawned.errors, sys.stderr)
        try:
            viewed = _view(spawned, out, err, signals)
        finally:
            out.close()
            err.close()
    viewed.run_id = detach.first_run_of(spawned.proc.pid, base, before)
    viewed.console = spawned.console
    if viewed.detached:
        if viewed.run_id:  # named: found by its id (the console is named when there is none yet)
            consoles.forget_console(spawned.console)
        return viewed
    if json_document:
        viewed.document = _document(spawned.console)
    consoles.forget_console(spawned.console)  # everything of it was copied; the runs are in the store
    return viewed


def _view(spawned: detach.Spawned, out: _Copy, err: _Copy, signals: Signals) -> Viewed:
    proc = spawned.proc
    try:
        exited = os.pidfd_open(proc.pid)  # readable once the supervisor has ended
    except (AttributeError, OSError):  # not Linux 5.3+: polled
        exited = None
    try:
        return _copy_until_end(proc, out, err, signals, exited)
    finally:
        if exited is not None:
            os.close(exited)


def _copy_until_end(proc, out: _Copy, err: _Copy, signals: Signals, exited: int | None) -> Viewed:
    asked = False
    while True:
        code = proc.poll()  # before the copy: all it wrote before it ended is copied below
        try:
            out()
        except (BrokenPipeError, OSError):
            return Viewed(exitcodes.BROKEN_PIPE, proc.pid, "the reader of stdout went away")
        try:
            err()
        except OSError:
            return Viewed(exitcodes.STOPPED, proc.pid, "stderr was closed")
        if code is not None:
            return ended(code, proc.pid, asked)
        if signals.hangup:
            return Viewed(exitcodes.STOPPED, proc.pid, "a hang-up")
        if signals.stop and not asked:  # stopped at once, as ``accelctl cancel`` does
            asked = True
            ask_stop(proc.pid)
        wait_exit(proc, POLL_S, exited, signals.wake[0] if signals.wake else None)


def wait_exit(proc, timeout_s: float, exited: int | None = None, wake: int | None = None) -> None:
    """Up to ``timeout_s`` for ``proc`` to end: the viewer ends as soon as its supervisor has,
    and acts on a signal as soon as it comes (``exited``: a pidfd of ``proc``; ``wake``: the
    signals' self-pipe), sleeping meanwhile instead of polling."""
    if exited is None:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        return
    import select

    ready, _, _ = select.select([exited] + ([wake] if wake is not None else []), [], [], timeout_s)
    if wake is not None and wake in ready:
        try:
            os.read(wake, 512)
        except OSError:
            pass


def ask_stop(pid: int) -> None:
    """Stop the run of supervisor ``pid`` as ``accelctl cancel`` does: SIGTERM to it (it stops its
    launches as on Ctrl-C and records the run ``stopped``)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def ended(code: int, pid: int, asked: bool) -> Viewed:
    """A supervisor that ended with ``code`` (``Popen.returncode``; ``asked``: a stop was sent)."""
    if code < 0 and asked and -code == signal.SIGTERM:
        return Viewed(exitcodes.STOPPED, pid)  # stopped while it started up, before its handler: no run yet
    return Viewed(code, pid) if code >= 0 else Viewed(exitcodes.FAILED, pid, killed_by=_name(-code))


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _document(console: Path) -> dict[str, Any]:
    try:
        data = json.loads(console.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

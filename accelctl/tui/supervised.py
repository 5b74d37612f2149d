"""``accelctl run FILE`` on a terminal: start + attach.

The run's supervisor is the one ``run --detach`` and the console stream start
(``accelctl.run.supervision.detach.spawn``: given the checked and planned runs, in a session of its own); this
process only shows its runs in the TUI, each in turn as the supervisor starts it (their
folders name the supervisor in ``runner.json``), read from the run store as they are written.

* ``x``, or ``q`` answered "stop", or a SIGTERM to this process: the stop is sent to the
  supervisor (SIGTERM, as ``accelctl cancel``), the TUI shows the run ending ``stopped``;
* ``q`` answered "leave", a hang-up (SIGHUP), or a TUI that fails: this process only
  detaches; the run goes on (``accelctl attach RUN`` follows it again);
* ``n`` (skip to the next workload) cannot be sent to a supervisor: it is not offered here.

``r`` in ``accelctl tui`` starts its run the same way (``start``: the supervisor of the run it
checked and planned, viewed in turn, run by run); there the TUI stays up once it ends.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from accelctl import exitcodes
from accelctl.run import store
from accelctl.run.store import consoles
from accelctl.run.supervision import batch, detach, foreground


class Supervisor:
    """The supervisor process this TUI views: its runs as they appear, its end, the stop."""

    def __init__(self, spawned: detach.Spawned, base: Path, before: set[str]) -> None:
        self.spawned, self.base = spawned, base
        self.pid = spawned.proc.pid
        self._seen = set(before)
        #: the folders of its runs seen so far, in order
        self.runs: list[Path] = []
        self.stop_sent = False
        #: why the viewer left while the supervisor goes on ("" : it did not)
        self.why = ""
        #: its preflight's verdict, once the TUI read it in its console ("" : none yet)
        self.verdict = ""
        self._console = None
        self._partial = b""

    def next_run(self) -> Path | None:
        """The supervisor's next run folder, once it exists (None: not yet, or no more)."""
        run_id = detach.first_run_of(self.pid, self.base, self._seen)
        if run_id is None:
            return None
        self._seen.add(run_id)
        self.runs.append(self.base / run_id)
        return self.runs[-1]

    def pending(self) -> bool:
        """A run folder of the supervisor exists that ``next_run`` has not handed out yet."""
        return detach.first_run_of(self.pid, self.base, self._seen) is not None

    def ended(self) -> bool:
        return self.spawned.proc.poll() is not None

    def stop(self) -> None:
        if not self.stop_sent and not self.ended():
            self.stop_sent = True
            foreground.ask_stop(self.pid)

    def new_verdicts(self) -> list[str]:
        """The preflight verdicts its console got since the last call (``run --preflight`` prints one)."""
        found = [line for line in self._console_lines() if _VERDICT.match(line)]
        self.verdict = found[-1] if found else self.verdict
        return found

    def _console_lines(self) -> list[str]:
        """The complete lines its console stream (stdout) got since the last call, colours taken out."""
        if self._console is None:
            try:
                self._console = open(self.spawned.console, "rb")  # noqa: SIM115 - read as it grows, closed by forget
            except OSError:
                return []
        data = self._partial + self._console.read()
        *lines, self._partial = data.split(b"\n")
        return [_ANSI.sub("", line.decode("utf-8", "replace")).rstrip() for line in lines]

    def why_it_ended(self) -> str:
        """Its first error line on stderr (a diagnostic's ``file:line:col: error[...]``, a refusal),
        else its last line there or on its console (a crash); "" : none."""
        for path in (self.spawned.errors, self.spawned.console):
            try:
                text = path.read_text(encoding="utf-8", errors="replace") if path is not None else ""
            except OSError:
                continue
            lines = [_ANSI.sub("", ln).strip() for ln in text.splitlines() if ln.strip()]
            if lines:
                return next((ln for ln in lines if "error" in ln), lines[-1])
        return ""

    def forget(self) -> None:
        """Its console folder in ``$TMPDIR`` goes (it has ended, or runs on with a run to name)."""
        if self._console is not None:
            self._console.close()
            self._console = None
        consoles.forget_console(self.spawned.console)


#: a colour or style sequence in a console line
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: the preflight's verdict in its console (``accelctl.run.supervision.preflight``'s messages)
_VERDICT = re.compile(r"(preflight (ok|failed)\b|preflight: |no preflight for )")


def start(runs: batch.Batch, root) -> Supervisor:
    """Start the supervisor of ``runs`` (checked and planned) storing into ``root`` (its console
    files in a folder of their own under ``$TMPDIR``) and return it at once."""
    base = store.runs_root(root)
    before = set(os.listdir(base)) if base.is_dir() else set()
    spawned = detach.spawn(batch.encode(runs), root, split=True, folder=consoles.viewer_folder(root))
    return Supervisor(spawned, base, before)


def view(runs: batch.Batch, root, path: Path | None, selection, count: int, *, app_factory,
         headless: bool = False, size: tuple[int, int] | None = None) -> foreground.Viewed:
    """Start the supervisor of ``runs`` and view its runs in the TUI (``count``
    of them expected: "1 of N"); how viewing ended, the run's exit status when the supervisor ended.

    ``app_factory`` is the app class (``accelctl.tui.app.AccelctlApp``, or a test's subclass),
    given by the caller: the app starts supervisors with ``start``, so this module does not
    import it back."""
    with foreground.Signals() as signals:  # from before the start: a SIGTERM meanwhile stops the run it starts
        sup = start(runs, root)
        spawned = sup.spawned
        app = app_factory(path, runs_root=root, supervisor=sup, signals=signals,
                          selection=selection, queue=(1, count) if count > 1 else None)
        try:
            app.run(headless=headless, size=size)
        except KeyboardInterrupt:
            sup.stop()
        except Exception as exc:  # noqa: BLE001 - the run must outlive a broken display
            sup.why = f"the TUI failed: {type(exc).__name__}: {exc}"
        if app.return_code not in (0, exitcodes.STOPPED, None) and not sup.why:
            sup.why = "the TUI failed (its error is above)"
        if signals.stop:
            sup.stop()
        if sup.stop_sent:  # a stop asked: shown to its end (the supervisor ends the batch)
            spawned.proc.wait()
    viewed = _outcome(sup, signals)
    try:
        print_summaries(sup.runs)
    except OSError:  # the terminal hung up: the runs' figures stay in their folders
        pass
    if not viewed.detached and not sup.runs:  # it ended before any run: its refusal, its preflight, its crash are the command's
        _copy(spawned.console, sys.stdout)
        _copy(spawned.errors, sys.stderr)
    if not viewed.detached or viewed.run_id:  # copied, or detached from a run it can name: not needed to find it
        sup.forget()
    return viewed


def _outcome(sup: Supervisor, signals) -> foreground.Viewed:
    proc = sup.spawned.proc
    if proc.poll() is not None:
        viewed = foreground.ended(proc.returncode, sup.pid, sup.stop_sent)
    else:
        why = sup.why or ("a hang-up" if signals.hangup else "you left the view")
        viewed = foreground.Viewed(exitcodes.STOPPED, sup.pid, why)
    viewed.run_id = sup.runs[-1].name if sup.runs else None
    viewed.console = sup.spawned.console
    return viewed


def print_summaries(runs: list[Path]) -> None:
    """After the alternate screen is gone: each ended run's figures stay in the terminal."""
    from accelctl.run.viewers.console import summary_rows

    for run_dir in runs:
        summary = store.read_json(run_dir / store.SUMMARY_FILE)
        if summary:
            print(f"run {run_dir.name}")
            for label, value in summary_rows(summary, run_dir):
                print(f"  {label}: {value}")
    sys.stdout.flush()


def _copy(path: Path | None, stream) -> None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace") if path is not None else ""
    except OSError:
        return
    if text:
        stream.write(text)
        stream.flush()

"""The tail of a run's ``worker.log``, with the run's own log/failure messages in colour.

``open(path, follow)`` reads what the file holds now; with ``follow`` a timer reads
what is appended (every ``POLL_S``, only new bytes, from the event loop: the reads are
small).  Messages of the run's events (``LogMessage``, ``RunFailed``) arrive through the
reactive ``model`` and are appended as they come.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

POLL_S = 0.5
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")
LEVEL_STYLE = {"warning": "yellow", "warn": "yellow", "error": "bold red", "info": "cyan"}
#: worker.log lines that are the libraries' own deprecation chatter, not the run's news (else
#: the panel is mostly torch's ``_pytree`` and transformers' ``loss_type=None`` warnings); hidden
#: unless ``show_all`` (key ``a`` on the run view), and counted in the first line
NOISE = re.compile(r"_pytree|loss_type=None|FutureWarning|DeprecationWarning|UserWarning: .*deprecated|"
                   r"^\s*warnings\.warn\(|TypedStorage is deprecated|`torch_dtype` is deprecated|"
                   r"Setting `pad_token_id` to `eos_token_id`")


class LogTail(Static):
    model = reactive(None, always_update=True, layout=False, repaint=False)

    def __init__(self, max_lines: int = 300, **kwargs):
        super().__init__(**kwargs)
        self.lines: deque[tuple[str, str]] = deque(maxlen=max_lines)
        self.path: Path | None = None
        self._offset = 0
        self._partial = b""
        self._seen_logs = 0
        self._timer = None
        #: show the libraries' warnings too (``NOISE``)
        self.show_all = False

    def open(self, path: Path | None, follow: bool) -> None:
        """Start showing ``path`` (the run's worker.log); forget the previous run's lines."""
        self.lines.clear()
        self.path, self._offset, self._partial, self._seen_logs = path, 0, b"", 0
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.poll()
        if follow:
            self._timer = self.set_interval(POLL_S, self.poll)

    def stop_following(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.poll()

    def poll(self) -> None:
        if self.path is None:
            return
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read(256 * 1024)
        except OSError:
            return
        if not data:
            return
        self._offset += len(data)
        chunks = (self._partial + data).replace(b"\r", b"\n").split(b"\n")
        self._partial = chunks.pop()
        for raw in chunks:
            line = _CONTROL.sub("", raw.decode("utf-8", "replace")).rstrip()
            if line:
                self.lines.append(("log", line))
        self.refresh()

    def watch_model(self, model) -> None:
        if model is None:
            return
        # the model keeps a bounded deque and a running count: show what is new since last time
        new = model.log_total - self._seen_logs
        if new <= 0:
            return
        logs = model.log_lines()
        for level, msg in logs[max(0, len(logs) - new):]:
            self.lines.append((level, msg))
        self._seen_logs = model.log_total
        self.refresh()

    def toggle_all(self) -> None:
        self.show_all = not self.show_all
        self.refresh()

    def visible(self) -> tuple[list[tuple[str, str]], int]:
        """(the lines shown, how many library warnings are hidden)."""
        if self.show_all:
            return list(self.lines), 0
        kept = [(level, line) for level, line in self.lines if level != "log" or not NOISE.search(line)]
        return kept, len(self.lines) - len(kept)

    def render(self):
        height = max(1, self.content_size.height or self.size.height or 1)
        out = Text(no_wrap=True, overflow="ellipsis")
        lines, hidden = self.visible()
        if hidden:
            height -= 1
            out.append(f"({hidden} library warning line(s) hidden: a shows all)", "dim italic")
        shown = lines[-height:] if height > 0 else []
        if not shown and not hidden:
            return Text("(no output yet)", style="dim")
        for i, (level, line) in enumerate(shown):
            if i or hidden:
                out.append("\n")
            out.append(line, LEVEL_STYLE.get(level, "dim" if line.startswith("# accelctl") else ""))
        return out

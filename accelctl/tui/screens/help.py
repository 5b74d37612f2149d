"""The help screen: every key, by view."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("everywhere", (
        ("1 2 3 4", "Workloads · Plan · Run · Runs"),
        ("r", "run the selected workload target (live run screen)"),
        ("x", "stop the live run (as accelctl cancel; recorded as stopped)"),
        ("t", "switch target (of the selected workload)"),
        ("c", "compare two marked runs (Runs)"),
        ("ctrl+p", "command palette"),
        ("?", "this help"),
        ("q", "quit (asks first while a run is live: s stop, l leave it running)"),
    )),
    ("Workloads", (
        ("↑ ↓ / tab", "choose a file / a workload › target"),
        ("enter", "open the target's plan"),
        ("f5", "re-read the folder"),
    )),
    ("Plan", (("d", "diff this plan against another target's"), ("esc", "back from the diff"))),
    ("Run", (("l", "switch between the summary and worker.log once the run ended"),
             ("esc", "close a stored run"))),
    ("Runs", (
        ("enter", "open a run (replayed from its events.jsonl)"),
        ("p", "replay paced, at the recorded speed"),
        ("space", "mark as A, then B, for compare"),
        ("g", "reload the run store"),
    )),
    ("Compare", (("s", "swap A and B"), ("esc", "back"))),
)


def help_table() -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column()
    for section, rows in KEYS:
        t.add_row(Text(section, style="bold underline"), "")
        for key, what in rows:
            t.add_row(key, what)
    return t


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="dialog"):
            yield Static(help_table(), id="help-text")

    def on_mount(self) -> None:
        box = self.query_one("#help-box")
        box.border_title = "accelctl tui — keys"
        box.border_subtitle = "esc close"

    def action_close(self) -> None:
        self.dismiss(None)

"""Modal dialogs: pick one of a list (targets), and "a run is live: stop it and quit?"."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option


class PickScreen(ModalScreen):
    """Choose one value; dismisses with it, or with None on escape."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, choices: list[tuple[str, str]], current: str | None = None):
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="pick-box", classes="dialog"):
            yield OptionList(*[Option(Text(label, no_wrap=True, overflow="ellipsis"), id=str(i))
                               for i, (label, _) in enumerate(self.choices)], id="pick-list")

    def on_mount(self) -> None:
        box = self.query_one("#pick-box")
        box.border_title = self.title_text
        box.border_subtitle = "enter choose · esc cancel"
        ol = self.query_one(OptionList)
        values = [v for _, v in self.choices]
        if self.current in values:
            ol.highlighted = values.index(self.current)
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.choices[int(event.option.id)][1])

    def action_cancel(self) -> None:
        self.dismiss(None)


class QuitScreen(ModalScreen):
    """Asked when quitting while a run is live; dismisses with True (stop and quit) or False;
    ``detachable`` (the run has a supervisor of its own): also "detach" (leave, the run goes on)."""

    BINDINGS = [
        Binding("s,y", "answer(True)", "Stop & quit"),
        Binding("escape,n,c", "answer(False)", "Keep running"),
        Binding("l,d", "leave", "Leave it running", show=False),
    ]

    def __init__(self, run_id: str, detachable: bool = False):
        super().__init__()
        self.run_id = run_id
        self.detachable = detachable

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-box", classes="dialog"):
            yield Static(Text.assemble(("A run is still going:\n", "bold"), (self.run_id, "cyan"),
                                       "\n\nStop it (the whole process group; recorded as stopped) and quit?"
                                       + ("\nOr leave it running (accelctl attach RUN follows it again)?"
                                          if self.detachable else "")),
                         id="quit-text")
            with Horizontal(id="quit-buttons"):
                yield Button("Stop & quit [s]", variant="error", id="quit-stop")
                if self.detachable:
                    yield Button("Leave [l]", id="quit-leave")
                yield Button("Keep running [esc]", variant="primary", id="quit-keep")

    def on_mount(self) -> None:
        self.query_one("#quit-box").border_title = "quit?"
        self.query_one("#quit-keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss("detach" if event.button.id == "quit-leave" else event.button.id == "quit-stop")

    def action_answer(self, stop: bool) -> None:
        self.dismiss(stop)

    def action_leave(self) -> None:
        if self.detachable:
            self.dismiss("detach")

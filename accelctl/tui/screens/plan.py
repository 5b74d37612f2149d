"""The Plan screen: the plan of the selected target — commands, environment, generated
files — highlighted, with its notes (memory fit, threads...) and warnings on top; ``d``
shows a unified diff of this plan against another target's.

A target that cannot be planned shows why (its diagnostics) instead of a plan.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from accelctl.tui.highlight import highlight_diff, highlight_plan
from accelctl.tui.screens.base import AppScreen


class PlanScreen(AppScreen):
    VIEW = "plan"
    BINDINGS = [
        Binding("d", "diff", "Diff"),
        Binding("escape", "undiff", "Plan", show=False),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.shown: tuple = ()
        self.diff_with: str | None = None

    def compose(self) -> ComposeResult:
        yield self.top_bar()
        yield Static(id="plan-notes")
        with VerticalScroll(id="plan-box"):
            yield Static(id="plan-text")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#plan-notes").border_title = "notes"
        self.show()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.show()

    def show(self, force: bool = False) -> None:
        sel = self.app.selection
        key = (sel.path, sel.workload, sel.target, self.diff_with)
        if key == self.shown and not force:
            return
        self.shown = key
        notes = self.query_one("#plan-notes", Static)
        text = self.query_one("#plan-text", Static)
        box = self.query_one("#plan-box")
        spec = self.app.selected_spec()
        if spec is None or sel.target is None:
            notes.display = False
            box.border_title = "plan"
            text.update(Text("No valid workload target selected: pick one on the Workloads screen (1).", style="dim"))
            return
        result = self.app.plan_for(spec, sel.target)
        if self.diff_with:
            other = self.app.plan_for(spec, self.diff_with)
            from accelctl.tui.workspace import plan_diff

            notes.display = False
            box.border_title = f"diff: {spec.name} › {sel.target} → {self.diff_with}"
            text.update(highlight_diff(plan_diff(result, other, sel.target, self.diff_with)))
            return
        box.border_title = f"plan: {spec.name} › {sel.target}"
        if result.error:
            notes.display = False
            box.border_title += " · cannot be planned"
            text.update(Text(result.error, style="red"))
            return
        p = result.plan
        box.border_title += f" · {p.backend} · {p.engine} · {p.device}"
        lines = Text()
        for w in p.warnings:
            lines.append("warning: ", "bold yellow")
            lines.append(w + "\n", "yellow")
        for n in p.notes:
            lines.append("• ", "#56b6c2")
            lines.append(n + "\n")
        lines.rstrip()
        notes.display = bool(p.notes or p.warnings)
        notes.update(lines)
        text.update(highlight_plan(result.text))

    # -- actions ---------------------------------------------------------------------

    def action_diff(self) -> None:
        spec = self.app.selected_spec()
        sel = self.app.selection
        if spec is None:
            return
        others = [t.name for t in spec.targets if t.name != sel.target]
        if not others:
            self.notify(f"workload {spec.name} has only one target: nothing to diff", severity="warning")
            return
        if len(others) == 1:
            self.set_diff(others[0])
            return
        from accelctl.tui.screens.dialogs import PickScreen

        self.app.push_screen(PickScreen(f"diff {sel.target} against", [(o, o) for o in others]), self.set_diff)

    def set_diff(self, target: str | None) -> None:
        if target:
            self.diff_with = target
            self.show()

    def action_undiff(self) -> None:
        if self.diff_with:
            self.diff_with = None
            self.show()

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "undiff":
            return self.diff_with is not None
        return True

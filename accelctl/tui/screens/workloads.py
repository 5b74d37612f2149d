"""The Workloads screen: the ``.wl`` files of a folder with their validation state, the
selected file highlighted with its diagnostics inline, and its (workload, target) pairs.

Highlighting a file or a target posts ``SelectionChanged`` up to the app; Enter on a
target opens its plan.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from accelctl.tui.highlight import source_with_diagnostics_wrapped
from accelctl.tui.messages import SelectionChanged
from accelctl.tui.screens.base import AppScreen

STATE_MARK = {"ok": ("✓", "green"), "warnings": ("!", "yellow"), "errors": ("✗", "red")}


def _file_label(wf, root) -> Text:
    mark, style = STATE_MARK[wf.state]
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{mark} ", style)
    try:
        name = str(wf.path.relative_to(root))
    except ValueError:
        name = wf.path.name
    t.append(name)
    if wf.errors:
        t.append(f" {wf.errors} err", "red")
    elif wf.warnings:
        t.append(f" {wf.warnings} warn", "yellow")
    return t


class WorkloadsScreen(AppScreen):
    VIEW = "workloads"
    BINDINGS = [Binding("enter", "open_plan", "Plan", show=False), Binding("f5", "rescan", "Rescan", show=False)]

    def compose(self) -> ComposeResult:
        yield self.top_bar()
        with Horizontal(id="wl-main"):
            with Vertical(id="wl-side"):
                yield OptionList(id="wl-files")
                yield OptionList(id="wl-targets")
            with VerticalScroll(id="wl-source-box"):
                yield Static(id="wl-source")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#wl-files").border_title = "workload files"
        self.query_one("#wl-targets").border_title = "workload › target"
        self.load()

    def load(self) -> None:
        files = self.app.workload_files()
        ol = self.query_one("#wl-files", OptionList)
        ol.clear_options()
        root = self.app.workspace_root
        ol.add_options([Option(_file_label(wf, root), id=str(i)) for i, wf in enumerate(files)])
        if not files:
            self.query_one("#wl-source", Static).update(Text(f"no .wl files in {root}", style="dim"))
            return
        sel = self.app.selection
        # the first valid file with a target that runs here, else the first valid file
        first_valid = next((i for i, wf in enumerate(files) if not wf.errors and self._runnable(wf) is not None),
                           next((i for i, wf in enumerate(files) if not wf.errors), 0))
        idx = next((i for i, wf in enumerate(files) if sel.path is not None and wf.path == sel.path), first_valid)
        ol.highlighted = idx
        self._show(idx)

    def action_rescan(self) -> None:
        self.app.workload_files(rescan=True)
        self.load()

    def _show(self, idx: int) -> None:
        wf = self.app.workload_files()[idx]
        src = self.query_one("#wl-source", Static)
        src.update(source_with_diagnostics_wrapped(wf.text, wf.diags))
        box = self.query_one("#wl-source-box")
        state = (f"{wf.errors} error(s)" if wf.errors else f"{wf.warnings} warning(s)" if wf.warnings else "valid")
        box.border_title = f"{wf.path.name} · {state}"
        targets = self.query_one("#wl-targets", OptionList)
        targets.clear_options()
        pairs = wf.choices()
        targets.add_options([Option(Text(f"{w} › {t}", no_wrap=True, overflow="ellipsis"), id=f"{w}\0{t}")
                             for w, t in pairs])
        sel = self.app.selection
        if pairs:
            pick = next((i for i, p in enumerate(pairs) if sel.path == wf.path and p == (sel.workload, sel.target)),
                        self._runnable(wf) or 0)
            targets.highlighted = pick
            self.post_message(SelectionChanged(wf.path, *pairs[pick]))
        else:
            self.post_message(SelectionChanged(wf.path, None, None))

    def _runnable(self, wf) -> int | None:
        """The index of the file's first (workload, target) pair that runs on this machine."""
        from accelctl.plan.select import runs_here

        for i, (w, t) in enumerate(wf.choices()):
            spec = wf.spec(w)
            if runs_here(spec, spec.target(t), self.app.present_devices):
                return i
        return None

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "wl-files":
            self._show(int(event.option.id))
        elif event.option_list.id == "wl-targets" and event.option.id:
            workload, target = event.option.id.split("\0")
            idx = self.query_one("#wl-files", OptionList).highlighted
            if idx is not None:
                self.post_message(SelectionChanged(self.app.workload_files()[idx].path, workload, target))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "wl-files":
            self.query_one("#wl-targets", OptionList).focus()
        else:
            self.app.switch_mode("plan")

    def action_open_plan(self) -> None:
        self.app.switch_mode("plan")

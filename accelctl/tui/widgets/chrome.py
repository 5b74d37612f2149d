"""The top bar: the app's four views with their keys, the current one highlighted, and a
short context on the right (the selected workload › target, the live run's state)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

VIEWS = (("1", "workloads", "Workloads"), ("2", "plan", "Plan"), ("3", "run", "Run"), ("4", "runs", "Runs"))


class TopBar(Static):
    active = reactive("workloads")
    context = reactive("")

    def __init__(self, active: str, **kwargs):
        super().__init__(**kwargs)
        self.set_reactive(TopBar.active, active)

    def render(self):
        tabs = Text(no_wrap=True)
        tabs.append(" accelctl ", "bold reverse")
        for key, mode, label in VIEWS:
            style = "bold reverse" if mode == self.active else ""
            tabs.append(" ")
            tabs.append(f"{key} {label}", style)
        grid = Table.grid(expand=True, padding=(0, 1))  # a space between the tabs and the context, always
        grid.add_column(no_wrap=True)
        grid.add_column(justify="right", no_wrap=True, overflow="ellipsis", ratio=1)
        grid.add_row(tabs, Text(self.context, style="dim"))
        return grid

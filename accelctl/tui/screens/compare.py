"""Two stored runs side by side: A (the baseline) and B.

Speed-up is the ratio of the steady-state median step times (A / B, from
``steady_state`` over each run's events: warm-up excluded, the straggler defines a
step).  Price-performance compares the cost of a million samples (tokens, for
generation) at each run's median throughput, with the target's ``price_per_hour`` from
the run's ``spec.json``; without a price it says so.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Static

from accelctl.tui import fmt
from accelctl.tui.screens.base import AppScreen
from accelctl.tui.widgets.plots import ComparePlot
from accelctl.tui.widgets.stats import STATUS_STYLE


def side_table(side) -> Table:
    r, st = side.record, side.stats
    g = Table.grid(padding=(0, 1))
    g.add_column(style="bold", no_wrap=True, min_width=10)
    g.add_column(no_wrap=True, overflow="ellipsis")
    g.add_row("run", r.id)
    g.add_row("target", f"{r.workload} › {r.target}")
    g.add_row("backend", f"{r.backend} · {(r.summary or {}).get('device', '?')}")
    g.add_row("status", Text(r.status, style=STATUS_STYLE.get(r.status, "")))
    d = st.step_time
    g.add_row("steps", f"{d.count} measured, {st.warmup_steps} warm-up" if d else "none measured")
    g.add_row("median", fmt.ms(side.median_s))
    g.add_row("p90", fmt.ms(d.p90) if d else "-")
    value, unit = side.throughput
    g.add_row("throughput", f"{fmt.num(value)} {unit}/s" if value is not None else "-")
    g.add_row("price", f"{fmt.money(side.price_per_hour)}/h" if side.price_per_hour is not None else "unknown")
    cost = side.cost_per_million
    g.add_row("cost", f"{fmt.money(cost)} per 1M {unit}" if cost is not None else "-")
    return g


def verdict(cmp) -> Text:
    t = Text()
    s = cmp.speedup
    if s is None:
        t.append("speed-up: - (a run has no measured steps)\n", "dim")
    else:
        faster = "faster" if s >= 1 else "slower"
        t.append("speed-up ", "bold")
        t.append(f"B is {fmt.ratio(s if s >= 1 else 1 / s)} {faster} than A", "bold green" if s >= 1 else "bold red")
        t.append(f"  (median step {fmt.ms(cmp.a.median_s)} → {fmt.ms(cmp.b.median_s)})\n")
    pp = cmp.price_performance
    if pp is not None:
        better = "more" if pp >= 1 else "less"
        unit = cmp.a.throughput[1]
        t.append("price-performance ", "bold")
        t.append(f"B does {fmt.ratio(pp if pp >= 1 else 1 / pp)} {better} {unit} per dollar than A",
                 "bold green" if pp >= 1 else "bold red")
        t.append("\n")
    else:
        t.append("price-performance: -\n", "dim")
    for c in cmp.caveats:
        t.append(f"! {c}\n", "yellow")
    t.rstrip()
    return t


class CompareScreen(AppScreen):
    VIEW = "runs"
    BINDINGS = [Binding("escape", "close", "Back", show=False), Binding("s", "swap", "Swap A/B")]

    def __init__(self, record_a, record_b, **kwargs):
        super().__init__(**kwargs)
        from accelctl.tui.workspace import compare

        self.records = (record_a, record_b)
        self.cmp = compare(record_a, record_b)

    def compose(self) -> ComposeResult:
        yield self.top_bar()
        with Horizontal(id="cmp-sides"):
            yield Static(id="cmp-a", classes="cmp-side")
            yield Static(id="cmp-b", classes="cmp-side")
        yield Static(id="cmp-verdict")
        yield ComparePlot((self.cmp.a, self.cmp.b), id="cmp-plot")
        yield Footer()

    def on_mount(self) -> None:
        self.draw()

    def draw(self) -> None:
        a, b = self.query_one("#cmp-a", Static), self.query_one("#cmp-b", Static)
        a.border_title, b.border_title = "A (baseline)", "B"
        a.update(side_table(self.cmp.a))
        b.update(side_table(self.cmp.b))
        self.query_one("#cmp-verdict", Static).update(verdict(self.cmp))
        plot = self.query_one(ComparePlot)
        plot.sides = (self.cmp.a, self.cmp.b)
        plot.border_title = "measured step time (ms): [#56b6c2]A[/] [#c678dd]B[/], median lines"
        plot.refresh()

    def action_swap(self) -> None:
        from accelctl.tui.workspace import Comparison

        self.cmp = Comparison(self.cmp.b, self.cmp.a)
        self.draw()

    def action_close(self) -> None:
        self.app.pop_screen()

"""Two stored runs side by side: A (the baseline) and B.

The comparison is ``accelctl compare``'s (``accelctl.analysis.compare`` over each run's
report entry): the speed-up of B over A by steady-state throughput (else latency, else
step time) with its 95 % CI and verdict (improvement, regression, no significant
difference), and price-performance (speed-up x price A / price B) with the target's
``price_per_hour`` from each run's ``spec.json``; without a price it says so.  The same
rules as the command: fewer than 3 independent runs a side is "inconclusive" with no
verdict wording; runs it refuses (E226 incomplete, E227 different workloads) show the
refusal and no speed-up until ``f`` (its ``--force``).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Static

from accelctl.analysis import throughput
from accelctl.analysis.compare import IMPROVEMENT, INCONCLUSIVE, REFUSED, REGRESSION
from accelctl.tui import fmt
from accelctl.tui.screens.base import AppScreen
from accelctl.tui.widgets.plots import ComparePlot
from accelctl.tui.widgets.stats import status_style

VERDICT_STYLE = {IMPROVEMENT: "bold green", REGRESSION: "bold red"}


def side_table(side) -> Table:
    r, e = side.record, side.entry
    g = Table.grid(padding=(0, 1))
    g.add_column(style="bold", no_wrap=True, min_width=10)
    g.add_column(no_wrap=True, overflow="ellipsis")
    g.add_row("run", r.id)
    g.add_row("target", f"{r.workload} › {r.target}")
    g.add_row("backend", f"{r.backend} · {(r.summary or {}).get('device', '?')}")
    g.add_row("status", Text(e.status, style=status_style(e.status)))
    if len(e.run_values) > 1:
        g.add_row("runs", f"{len(e.run_values)} independent runs (series)")
    n = len(e.step_times)
    g.add_row("steps", f"{n} measured, {e.warmup_steps} warm-up" if n else "none measured")
    ci = e.step_time_ci
    g.add_row("mean", fmt.ms(e.step_time_s) + (f" (95% CI {fmt.ms(ci.low)}–{fmt.ms(ci.high)})" if ci else ""))
    g.add_row("median", f"{fmt.ms(side.median_s)} · p90 {fmt.ms(e.step_time_p90_s)}")
    value, unit = side.throughput
    g.add_row("throughput", throughput.text(value, unit))
    g.add_row("price", f"{fmt.money(side.price_per_hour)}/h" if side.price_per_hour is not None else "unknown")
    cost = side.cost_per_million
    g.add_row("cost", f"{fmt.money(cost)} per 1M {unit.split('/')[0]}" if cost is not None else "-")
    return g


def _times(x: float, ci) -> tuple[str, str]:
    """``x`` as a factor >= 1 ("N× faster/more", "N× slower/fewer") and its CI the same way round."""
    if x >= 1:
        return fmt.ratio(x), "" if ci is None else f"{fmt.ratio(ci.low)}–{fmt.ratio(ci.high)}"
    return fmt.ratio(1 / x), "" if ci is None else f"{fmt.ratio(1 / ci.high)}–{fmt.ratio(1 / ci.low)}"


def refused(cmp) -> Text:
    """Runs ``accelctl compare`` refuses: why, and no figure of B against A."""
    t = Text()
    t.append(REFUSED, "bold red")
    t.append(": accelctl compare refuses these runs, so no ratio of B to A is shown\n")
    for r in cmp.result.refusals:
        t.append(f"✗ [{r.code}] {r.message}\n", "bold red")
    t.append("press f to compare them anyway (accelctl compare --force)", "dim")
    return t


def verdict(cmp) -> Text:
    res = cmp.result
    if res.verdict == REFUSED:
        return refused(cmp)
    t = Text()
    s = cmp.speedup
    if s is None:
        t.append("speed-up: - (a run has no measured steps)\n", "dim")
    else:
        factor, ci = _times(s, cmp.speedup_ci)
        t.append("speed-up ", "bold")
        t.append(f"B is {factor} {'faster' if s >= 1 else 'slower'} than A", "bold green" if s >= 1 else "bold red")
        t.append(f" by {res.basis}" + (f" (95% CI {ci})" if ci else "") + "\n")
    na, nb = res.runs
    if res.verdict == INCONCLUSIVE:  # no verdict wording at all: it could not decide
        t.append("inconclusive ", "bold yellow")
        t.append(f"(A: {na} run(s), B: {nb}): {res.reason}\n", "yellow")
    else:
        t.append("verdict ", "bold")
        t.append(res.verdict, VERDICT_STYLE.get(res.verdict, "bold yellow"))
        t.append(f" (CI over the {res.values}, A: {na}, B: {nb}"
                 + (f", Welch p = {res.welch.p_value:.2g}" if res.welch else "") + ")\n")
    pp = cmp.price_performance
    if pp is not None:
        factor, ci = _times(pp, cmp.price_performance_ci)
        unit = cmp.a.throughput[1].split("/")[0]
        t.append("price-performance ", "bold")
        t.append(f"B gets {factor} {'more' if pp >= 1 else 'fewer'} {unit} per dollar",
                 "bold green" if pp >= 1 else "bold red")
        t.append(f" (CI {ci})\n" if ci else "\n")
    else:
        t.append("price-performance: -\n", "dim")
    for r in res.refusals:
        t.append(f"FORCED past [{r.code}] {r.message}\n", "bold red")
    for c in cmp.caveats:
        t.append(f"! {c}\n", "yellow")
    t.rstrip()
    return t


class CompareScreen(AppScreen):
    VIEW = "runs"
    BINDINGS = [Binding("escape", "close", "Back", show=False), Binding("s", "swap", "Swap A/B"),
                Binding("f", "force", "Compare anyway")]

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

        self.cmp = Comparison(self.cmp.b, self.cmp.a, self.cmp.force)
        self.draw()

    def action_force(self) -> None:
        """Compare runs that are refused (E226/E227), as ``accelctl compare --force``."""
        from accelctl.tui.workspace import Comparison

        self.cmp = Comparison(self.cmp.a, self.cmp.b, force=True)
        self.draw()

    def action_close(self) -> None:
        self.app.pop_screen()

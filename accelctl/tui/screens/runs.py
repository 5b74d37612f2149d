"""The Runs screen: the run store as a table.  Enter opens a run (replayed from its
``events.jsonl`` at full speed; ``p`` paces it by its recorded timestamps; a run still
being written is followed); space marks runs, ``c`` compares the two marked (or the
marked one and the highlighted one) side by side.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from accelctl.analysis import throughput
from accelctl.tui import fmt
from accelctl.tui.messages import OpenRun
from accelctl.tui.screens.base import AppScreen
from accelctl.tui.widgets.stats import status_style

#: the id is the short one every command takes (``accelctl report 0001``), as ``accelctl runs`` shows it
COLUMNS = ("", "id", "started", "workload", "target", "status", "median step", "throughput")


def _started(record) -> str:
    s = record.started or ""
    return f"{s[5:10]} {s[11:16]}" if len(s) >= 16 else s


class RunsScreen(AppScreen):
    VIEW = "runs"
    BINDINGS = [
        Binding("enter", "open", "Open", show=False),
        Binding("space", "mark", "Mark"),
        Binding("p", "open(True)", "Replay paced", show=False),
        Binding("g", "reload", "Reload", show=False),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.records: list = []
        self.marked: list[str] = []

    def compose(self) -> ComposeResult:
        yield self.top_bar()
        yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="runs-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col or "mark")
        self.reload()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    def reload(self) -> None:
        from accelctl.api import list_runs
        from accelctl.run.store import RunStoreError

        try:
            self.records = list_runs(self.app.runs_root)
        except RunStoreError as exc:  # the store folder itself cannot be read
            self.records = []
            self.notify(str(exc), severity="error")
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear()
        from accelctl.report.width import short_ids

        short = short_ids([r.id for r in self.records])
        for r in self.records:
            thr = throughput.text(r.throughput, r.throughput_unit)
            table.add_row(self._mark(r.id), short.get(r.id, r.id), _started(r), r.workload, r.target,
                          Text(r.status, style=status_style(r.status)), fmt.ms(r.median_step_time_s),
                          thr, key=r.id)
        table.border_title = f"run store · {len(self.records)} run(s) in {fmt.path(self.app.runs_root)}"
        if self.records:
            table.move_cursor(row=min(row, len(self.records) - 1))
        self._detail()

    def _mark(self, run_id: str) -> Text:
        if run_id not in self.marked:
            return Text(" ")
        return Text("AB"[self.marked.index(run_id)], style="bold reverse")

    def current(self):
        table = self.query_one(DataTable)
        if not self.records or table.cursor_row is None or table.cursor_row >= len(self.records):
            return None
        return self.records[table.cursor_row]

    def _detail(self) -> None:
        r = self.current()
        detail = self.query_one("#runs-detail", Static)
        if r is None:
            detail.update(Text("no runs yet: run a workload (r) and it appears here", style="dim"))
            return
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(r.id, "bold")
        t.append(f"  {r.backend}")
        if r.scheduler is not None:  # a scheduler's job: its id, state and exit code
            t.append(f"  {r.scheduler.short()}")
        if r.unreadable:
            t.append(f"\n{r.status}", "red")
        if r.series_id:
            t.append(f"\nrun {r.series.get('index', '?')} of {r.series.get('of', '?')} of series {r.series_id}", "dim")
        failure = (r.summary or {}).get("failure")
        if failure:
            first = (failure.get("message") or "").strip().splitlines()
            t.append(f"\n{failure.get('reason')}: {first[0] if first else ''}", "red")
        if self.marked:
            t.append("\nmarked: " + ", ".join(f"{'AB'[i]}={m}" for i, m in enumerate(self.marked)), "dim")
        detail.update(t)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    # -- actions ---------------------------------------------------------------------

    def action_open(self, paced: bool = False) -> None:
        r = self.current()
        if r is not None:
            self.post_message(OpenRun(r.path, paced=paced))

    def action_mark(self) -> None:
        r = self.current()
        if r is None:
            return
        if r.id in self.marked:
            self.marked.remove(r.id)
        else:
            self.marked = (self.marked + [r.id])[-2:]
        table = self.query_one(DataTable)
        for rec in self.records:
            table.update_cell(rec.id, "mark", self._mark(rec.id))
        self._detail()

    def pair(self):
        """The two runs to compare: the two marked, or the marked one and the highlighted."""
        by_id = {r.id: r for r in self.records}
        ids = [m for m in self.marked if m in by_id]
        cur = self.current()
        if len(ids) == 1 and cur is not None and cur.id != ids[0]:
            ids.append(cur.id)
        return [by_id[i] for i in ids[:2]] if len(ids) >= 2 else None

    def compare(self) -> None:
        pair = self.pair()
        if pair is None:
            self.notify("mark two runs with space (or mark one and highlight another), then press c",
                        severity="warning")
            return
        from accelctl.tui.screens.compare import CompareScreen

        self.app.push_screen(CompareScreen(*pair))

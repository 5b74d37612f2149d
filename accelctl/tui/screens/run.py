"""The run screen: a live run or a stored one replayed, as panels over its events.

Messages up, attributes down: a thread worker (``accelctl.tui.feed.pump``) posts
``RunEvents`` / ``RunEnded``; this screen folds them into its ``RunModel`` at once and
hands the model down to every panel (each panel's ``model`` is reactive and redraws
itself) at most ``PUSH_INTERVAL_S`` apart, and at once when the run ends.  So a run with
fast steps costs a few repaints a second, not one per step: the TUI shares the machine
with the run it measures.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from accelctl.tui.messages import FeedFailed, RunEnded, RunEvents
from accelctl.tui.model import RunModel
from accelctl.tui.screens.base import AppScreen
from accelctl.tui.widgets.logtail import LogTail
from accelctl.tui.widgets.plots import SeriesPlot
from accelctl.tui.widgets.stats import ProgressPanel, RanksPanel, RunHeader, StatsPanel, SummaryPanel

#: the panels are redrawn at most this often while events arrive
PUSH_INTERVAL_S = 1.0


def _cancelled() -> bool:
    return get_current_worker().is_cancelled


class RunScreen(AppScreen):
    VIEW = "run"
    BINDINGS = [
        Binding("l", "toggle_log", "Log/summary"),
        Binding("a", "toggle_noise", "All log lines", show=False),
        Binding("escape", "close", "Back", show=False),
    ]

    def __init__(self, source=None, *, closable: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.source = None
        self.model = RunModel()
        self.closable = closable
        self._initial = source
        self._feed_id = 0
        self._dirty = False

    def compose(self) -> ComposeResult:
        yield self.top_bar()
        yield RunHeader(id="run-header")
        yield ProgressPanel(id="run-progress")
        with Horizontal(id="run-main"):
            with Vertical(id="run-plots"):
                yield SeriesPlot("step_time_s", median=True, id="plot-step")
                yield SeriesPlot("loss", "per_token_s", "tokens_per_s", "samples_per_s", id="plot-second")
            with Vertical(id="run-side"):
                yield StatsPanel(id="run-stats")
                yield RanksPanel(id="run-ranks")
        yield SummaryPanel(id="run-summary")
        yield LogTail(id="run-log")
        yield Static("No run yet: choose a workload target (1 Workloads) and press r to run it, "
                     "or open a stored run (4 Runs).", id="run-empty")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(PUSH_INTERVAL_S, self._flush)
        self.set_interval(1.0, self._tick)
        self.query_one("#run-stats").border_title = "steady state"
        self.query_one("#run-ranks").border_title = "process"
        self.query_one("#run-summary").border_title = "summary"
        self.query_one("#run-log").border_title = "worker.log"
        self._set_empty(True)
        if self._initial is not None:
            self.attach(self._initial)

    # -- attaching a source ------------------------------------------------------------

    def attach(self, source) -> None:
        """Show ``source`` (a ``LiveSource`` or ``ReplaySource``), replacing what was shown."""
        self.source = source
        self._feed_id += 1
        self.model = RunModel(run_id=Path(source.run_dir).name, total_steps=source.total_steps, task=source.task,
                              world_size=source.world_size, names=getattr(source, "names", ("", "", "")),
                              started_wall=getattr(source, "started_wall", None))
        self._set_empty(False)
        self.set_class(False, "-ended")
        self.set_class(False, "-show-log")
        self.query_one(LogTail).open(Path(source.run_dir) / "worker.log", follow=source.live)
        self._push()
        post = self.post_message
        self.run_worker(partial(_pump, source, post, self._feed_id), thread=True, exclusive=True, group="feed",
                        name=f"feed {self.model.run_id}", exit_on_error=False)
        self.refresh_context()

    def _set_empty(self, empty: bool) -> None:
        self.set_class(empty, "-empty")

    def _push(self) -> None:
        """Attributes down: the model to every panel."""
        for panel in self.query("RunHeader, ProgressPanel, SeriesPlot, StatsPanel, RanksPanel, SummaryPanel, LogTail"):
            panel.model = self.model

    # -- messages up from the feed ------------------------------------------------------

    def on_run_events(self, message: RunEvents) -> None:
        if message.feed_id != self._feed_id:
            return
        self.model.extend(message.events)
        self._dirty = True  # drawn by the next _flush

    def _tick(self) -> None:
        """The live run's clock: the progress line repaints when its second changed."""
        if self.model is not None and self.model.live:
            self.query_one(ProgressPanel).model = self.model

    def _flush(self) -> None:
        if self._dirty:
            self._dirty = False
            self._push()

    def on_run_ended(self, message: RunEnded) -> None:
        if message.feed_id != self._feed_id:
            message.stop()
            return
        self.model.end(message.status, message.summary)
        self._dirty = False
        self.set_class(True, "-ended")
        self.query_one(LogTail).stop_following()
        self._push()
        self.refresh_bindings()
        self.refresh_context()  # the message bubbles on to the app (a live run's end matters there)

    def on_feed_failed(self, message: FeedFailed) -> None:
        if message.feed_id == self._feed_id:
            self.notify(f"cannot read the run's events: {message.error}", severity="error", timeout=8)

    # -- actions ------------------------------------------------------------------------

    def action_toggle_noise(self) -> None:
        """The libraries' warnings in the log panel, shown or hidden (``LogTail.NOISE``)."""
        self.query_one(LogTail).toggle_all()

    def action_toggle_log(self) -> None:
        self.toggle_class("-show-log")

    def action_close(self) -> None:
        if self.closable:
            self.workers.cancel_group(self, "feed")
            self.app.pop_screen()

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "close":
            return self.closable
        if action == "toggle_log":
            return self.model.summary is not None
        return True


def _pump(source, post, feed_id: int) -> None:
    from accelctl.tui.feed import pump

    pump(source, post, feed_id, _cancelled)

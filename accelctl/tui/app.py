"""``accelctl tui``: the Textual app — Workloads, Plan, Run and Runs views (app modes),
Compare and Help on top, a command palette, the footer's keys.

The app holds the shared state (the workload folder, the selection, the live run) and
hands it down; screens post ``SelectionChanged`` up and the run screen's feed posts run
events up.  The app runs nothing itself: it displays and sends commands.  ``action_run`` makes
the same checks and plan as ``accelctl run`` and starts the run's own supervisor on that plan
(in a session of its own: ``accelctl.tui.supervised.start``), whose runs it shows in turn; ``action_stop`` / the quit dialog send that supervisor the stop (SIGTERM, as ``accelctl
cancel``); leaving, or a hang-up, leaves the run going.  Under ``accelctl run FILE``
(``supervisor``) the same, with a supervisor started before the app, which leaves when it ends.
``live_handle`` (``accelctl.tui.live.run_live``, the overhead benchmark) shows a run this
process launched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import ModalScreen, Screen

from accelctl import exitcodes
from accelctl.run.supervision.foreground import Signals
from accelctl.tui.messages import OpenRun, RunEnded, SelectionChanged
from accelctl.tui.screens.plan import PlanScreen
from accelctl.tui.screens.run import RunScreen
from accelctl.tui.screens.runs import RunsScreen
from accelctl.tui.screens.workloads import WorkloadsScreen

@dataclass(frozen=True)
class Selection:
    path: Path | None = None
    workload: str | None = None
    target: str | None = None


class AccelctlApp(App):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "accelctl"
    MODES = {"workloads": WorkloadsScreen, "plan": PlanScreen, "runs": RunsScreen}
    BINDINGS = [
        Binding("1", "mode('workloads')", "Workloads", show=False),
        Binding("2", "mode('plan')", "Plan", show=False),
        Binding("3", "mode('run')", "Run view", show=False),
        Binding("4", "mode('runs')", "Runs", show=False),
        Binding("r", "run", "Run"),
        Binding("x", "stop", "Stop"),
        Binding("t", "switch_target", "Target"),
        Binding("c", "compare", "Compare"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, path: str | Path | None = None, *, runs_root: str | Path | None = None, live_handle=None,
                 selection: Selection | None = None, auto_exit: bool = False, start: str = "workloads",
                 queue: tuple[int, int] | None = None, preflight: bool = False, attach: Path | None = None,
                 supervisor=None, signals: Signals | None = None):
        super().__init__()
        #: the supervisor of the runs shown (``accelctl.tui.supervised``): ``accelctl run FILE``'s, or
        #: the one ``r`` started (None once it has ended); its runs are shown in turn as it starts
        #: them; a stop is sent to it, leaving only detaches
        self.supervisor = supervisor
        #: ``accelctl run FILE``: the app leaves once its supervisor has ended (``accelctl tui`` stays up)
        self._leave_with_supervisor = supervisor is not None
        #: the viewer's signals (``foreground.Signals``): SIGTERM or SIGINT stop the run and leave,
        #: SIGHUP leaves with the run going; none come to an app given none
        self.signals = signals or Signals()
        #: N of ``measure { repeat = N }`` of the run ``r`` started (the header says "repeat 1 of N")
        self._repeats = 1
        #: ``accelctl attach RUN`` on a terminal: that run's folder, shown (and followed while it goes on)
        self.attach = attach
        #: ``accelctl tui --preflight``: each run started here is preflighted first, as ``run --preflight``
        self.preflight = preflight
        #: (this run's place, how many) when ``accelctl run FILE`` runs several workloads in turn:
        #: the header says "1 of 2"; each is shown as its supervisor starts it
        self.queue = queue
        from accelctl.run.store import runs_root as resolve_runs_root

        self.add_mode("run", self._make_run_screen)
        if path is None:
            path = Path("workloads") if Path("workloads").is_dir() else Path(".")
        path = Path(path)
        self.workspace_root = path if path.is_dir() else path.parent
        self.selection = selection or Selection(path=path if path.is_file() else None)
        self.runs_root = resolve_runs_root(runs_root)
        self.auto_exit = auto_exit
        self.start = start
        self.live = None  # the run shown live (SupervisedSource; LiveSource under run_live)
        self._live_ended = False
        self.run_screen: RunScreen | None = None
        self._live_handle = live_handle
        self._files = None
        self._plans: dict = {}
        self._quit_after_stop = False
        from accelctl.tui.priority import Launcher

        # the supervisors of runs start from this thread: at the priority the app was created
        # with, never the display's lowered one (accelctl.tui.priority)
        self._launcher = Launcher()

    def _make_run_screen(self) -> RunScreen:
        self.run_screen = RunScreen()
        return self.run_screen

    async def on_mount(self) -> None:
        if self._live_handle is not None:
            await self.start_live(self._live_handle)
        elif self.supervisor is not None:
            await self.switch_mode("run")
        else:
            await self.switch_mode(self.start)
        self.set_interval(0.1, self._follow_supervisor)
        if self.attach is not None:  # another process runs it: the TUI reads its folder, never stops it
            self.post_message(OpenRun(self.attach))

    # -- shared state, handed down ------------------------------------------------------

    def workload_files(self, rescan: bool = False):
        if self._files is None or rescan:
            from accelctl.tui.workspace import scan

            self._files = scan(self.workspace_root)
            self._plans.clear()
        return self._files

    def selected_file(self):
        return next((wf for wf in self.workload_files() if wf.path == self.selection.path), None)

    def selected_spec(self):
        wf = self.selected_file()
        return wf.spec(self.selection.workload) if wf is not None else None

    def plan_for(self, spec, target: str):
        from accelctl.tui.workspace import make_plan

        key = (spec.path, spec.name, target)
        if key not in self._plans:
            self._plans[key] = make_plan(spec, target)
        return self._plans[key]

    @property
    def live_running(self) -> bool:
        return self.live is not None and not self.live.done

    @property
    def busy(self) -> bool:
        """A run is going: the one shown, or its supervisor's (a preflight, the next repeat)."""
        return self.live_running or (self.supervisor is not None and not self.supervisor.ended())

    def context_text(self) -> str:
        sel = self.selection
        parts = [f"{'repeat ' if self._repeats > 1 else ''}{self.queue[0]} of {self.queue[1]}"] if self.queue else []
        if self.live is not None:
            parts.append(f"run {'live' if self.live_running else self.live.run_id[-4:] + ' ended'}")
        if sel.workload and sel.target:
            parts.append(f"{sel.workload} › {sel.target}")
        return " · ".join(parts) + " "

    def _refresh_context(self) -> None:
        refresh = getattr(self.screen, "refresh_context", None)
        if refresh is not None:
            refresh()

    def on_selection_changed(self, message: SelectionChanged) -> None:
        self.selection = Selection(message.path, message.workload, message.target)
        self._refresh_context()

    # -- runs ---------------------------------------------------------------------------

    async def start_live(self, handle) -> None:
        from accelctl.tui.feed import LiveSource

        await self._show_live(LiveSource(handle))

    async def _follow_supervisor(self) -> None:
        """The supervisor's next run shown once the one before has ended (and its end drawn), its
        preflight verdict told; a hang-up leaves the run going, a SIGTERM stops it and leaves."""
        sup = self.supervisor
        if self.signals.hangup:
            if sup is not None and not sup.ended():
                sup.why = sup.why or "a hang-up"
            self.exit(return_code=exitcodes.STOPPED)
            return
        if self.signals.stop and not self._quit_after_stop:
            self._quit_after_stop = True
            if sup is not None and not sup.ended():
                sup.stop()
            elif not self.live_running:
                self.exit(return_code=self.exit_code)
        if sup is None:
            return
        ended = sup.ended()  # looked at before its console is read: nothing it wrote is missed
        self._tell_preflight(sup)
        if self.live is not None and not self._live_ended:
            return
        run_dir = sup.next_run()
        if run_dir is not None:
            await self._show_next(sup, run_dir)
        elif ended:
            self._supervisor_ended(sup)

    async def _show_next(self, sup, run_dir: Path) -> None:
        from accelctl.tui.feed import SupervisedSource

        n = len(sup.runs)
        if self._repeats > 1:  # ``r``'s series: each repeat is a run of its own, shown in turn
            self.queue = (n, self._repeats)
            self.notify(f"repeat {n} of {self._repeats} (an independent process; "
                        f"measure {{ repeat = {self._repeats} }})")
        elif self.queue is not None and n > 1:
            self.queue = (n, max(self.queue[1], n))
        await self._show_live(SupervisedSource(run_dir, sup))

    def _tell_preflight(self, sup) -> None:
        """The preflight's verdict, as the supervisor printed it (``run --preflight``)."""
        for line in sup.new_verdicts():
            ok = line.startswith("preflight ok")
            self.notify(line, title="preflight", severity="information" if ok else "error", timeout=12)

    def _supervisor_ended(self, sup) -> None:
        """Every run of the supervisor shown to its end, and it has ended: ``accelctl run FILE``
        leaves (at once when nothing was shown); ``accelctl tui`` stays up (``r`` again)."""
        if self._leave_with_supervisor:
            if self.live is None or self._quit_after_stop:
                self.exit(return_code=self.exit_code)
            return
        code = sup.spawned.proc.returncode
        if not sup.runs and code and not (sup.verdict or sup.stop_sent):  # refused or crashed before a run
            self.notify(sup.why_it_ended() or f"its supervisor (pid {sup.pid}) ended with exit {code}",
                        title="cannot start the run", severity="error", timeout=12)
        sup.forget()
        self.supervisor = None
        self._refresh_context()
        self.refresh_bindings()
        if self._quit_after_stop or self.auto_exit:
            self.exit(return_code=self.exit_code)

    async def _show_live(self, source) -> None:
        self.live = source
        self._live_ended = False
        await self.switch_mode("run")
        self.run_screen.attach(self.live)
        self.refresh_bindings()

    def on_run_ended(self, message: RunEnded) -> None:
        if self.live is None or message.run_dir is None or Path(message.run_dir) != self.live.run_dir:
            return
        self._live_ended = True
        if self.screen is not self.run_screen:  # on the run view the header and summary say it
            sev = "information" if message.status == "ok" else "warning" if message.status == "stopped" else "error"
            self.notify(f"run {self.live.run_id}: {message.status}", severity=sev)
        self._refresh_context()
        self.refresh_bindings()
        if self.supervisor is not None and (self._quit_after_stop or self.auto_exit):
            return  # left once the supervisor has ended too (``_follow_supervisor``)
        if self._quit_after_stop or self.auto_exit:
            self.exit(return_code=self.exit_code)

    @cached_property
    def present_devices(self) -> dict[str, str]:
        """This machine's device families (``present_adapters``), probed once per app."""
        from accelctl.families import present_adapters

        return present_adapters()

    @property
    def exit_code(self) -> int:
        if self.live is None or not self.live.done:
            return 0
        from accelctl.run.supervision.orchestrate import exit_code

        return exit_code(self.live.status())

    def on_open_run(self, message: OpenRun) -> None:
        """A stored run, replayed from its events.jsonl (followed while still written)."""
        from accelctl.tui.feed import ReplaySource

        self.push_screen(RunScreen(ReplaySource(message.path, speed=1.0 if message.paced else None), closable=True))

    # -- actions ------------------------------------------------------------------------

    async def action_mode(self, mode: str) -> None:
        while isinstance(self.screen, ModalScreen):
            self.pop_screen()
        await self.switch_mode(mode)

    async def action_run(self) -> None:
        """Start the selected workload › target as ``accelctl run FILE -w W -t T [--preflight]``
        would: the same checks and plan, here (a refusal is a notice, and nothing
        starts), then the run's own supervisor, which preflights when asked and runs every repeat
        of ``measure { repeat = N }``; its runs are shown in turn (``_follow_supervisor``)."""
        if self.busy:
            self.notify("a run is already going: x stops it", severity="warning")
            return
        wf, spec, sel = self.selected_file(), self.selected_spec(), self.selection
        if wf is None or spec is None or sel.target is None:
            self.notify("choose a valid workload › target first (1 Workloads)", severity="warning")
            return
        result = self.plan_for(spec, sel.target)
        if result.error:
            self.notify(result.error.splitlines()[0], title="cannot plan", severity="error", timeout=8)
            return
        import asyncio

        from accelctl.errors import AccelctlError
        from accelctl.run.supervision import batch, orchestrate
        from accelctl.tui import supervised

        req = orchestrate.Request(target=sel.target, runs_dir=self.runs_root, preflight=self.preflight)
        try:
            chosen = orchestrate.choose([spec], req, self.present_devices)
            orchestrate.refuse_unstartable(chosen, wf.text, req, self.present_devices)
        except AccelctlError as exc:  # refused before a run folder exists, as `accelctl run` refuses it
            title = "not on this machine" if exc.exit_code == exitcodes.NO_DEVICE else "cannot start the run"
            self.notify(orchestrate.refusal_text(exc), title=title, severity="error", timeout=12)
            return
        c = chosen[0]
        if req.preflight:
            self.notify(orchestrate.preflight_line(c))
        runs = batch.Batch((c.planned(),), wf.text, req)  # the supervisor runs this plan, never parsing again
        try:
            sup = await asyncio.wrap_future(self._launcher.submit(supervised.start, runs, self.runs_root))
        except OSError as exc:  # no process could start (a full $TMPDIR, no fork): the TUI stays up
            self.notify(f"{type(exc).__name__}: {exc}", title="cannot start the run", severity="error", timeout=8)
            return
        self.supervisor, self._repeats, self.queue = sup, c.repeats, None
        self.refresh_bindings()

    def action_stop(self) -> None:
        if self.supervisor is not None and not self.supervisor.ended():  # also before its first run: a preflight
            self.supervisor.stop()
            self.notify("stopping the run (SIGTERM to its supervisor, as accelctl cancel)…")
            return
        if not self.live_running:  # (a run of run_live's, launched in this process, is stopped below)
            self.notify("no live run to stop", severity="warning")
            return
        self.live.stop()
        self.notify("stopping the run (SIGINT to its process group, then SIGTERM, SIGKILL)…")

    def action_switch_target(self) -> None:
        wf, spec = self.selected_file(), self.selected_spec()
        if spec is None:
            self.notify("choose a workload first (1 Workloads)", severity="warning")
            return
        from accelctl.tui import fmt
        from accelctl.tui.screens.dialogs import PickScreen

        choices = [(f"{t.name} · {t.device} × {t.world_size}"
                    + (f" · {fmt.money(t.price_per_hour)}/h" if t.price_per_hour is not None else ""), t.name)
                   for t in spec.targets]

        def chosen(target: str | None) -> None:
            if target:
                self.post_message(SelectionChanged(wf.path, spec.name, target))
                plan = next((s for s in self.screen_stack if isinstance(s, PlanScreen)), None)
                if plan is not None:
                    self.call_later(plan.show)

        self.push_screen(PickScreen(f"target of {spec.name}", choices, self.selection.target), chosen)

    async def action_compare(self) -> None:
        if not isinstance(self.screen, RunsScreen):
            await self.action_mode("runs")
            self.notify("mark two runs with space, then press c", severity="information")
            return
        self.screen.compare()

    def action_help(self) -> None:
        from accelctl.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        from accelctl.tui.screens.dialogs import QuitScreen

        if isinstance(self.screen, QuitScreen):
            return
        if not self.busy:
            self.exit(return_code=self.exit_code)
            return

        def answer(stop: bool | str | None) -> None:
            if stop == "detach" and self.busy:  # the run goes on under its own supervisor
                self.supervisor.why = "you left the view"
                self.exit(return_code=exitcodes.STOPPED)
            elif stop and self.busy:
                self._quit_after_stop = True
                self.action_stop()
            elif stop:
                self.exit(return_code=self.exit_code)

        what = (self.live.run_id if self.live_running
                else f"supervisor pid {self.supervisor.pid} (no run of it shown yet)")
        self.push_screen(QuitScreen(what, detachable=self.supervisor is not None), answer)

    def check_action(self, action: str, parameters) -> bool | None:
        if isinstance(self.screen, ModalScreen) and action in ("run", "stop", "switch_target", "compare", "mode"):
            return False
        if action == "stop":
            return True if self.busy else None  # None: shown dimmed
        if action == "run":
            return None if self.busy else True
        return True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Run", "Run the selected workload target, live", self.action_run)
        yield SystemCommand("Stop", "Stop the live run (its whole process group)", self.action_stop)
        yield SystemCommand("Switch target", "Choose another target of the selected workload",
                            self.action_switch_target)
        yield SystemCommand("Compare runs", "Compare the two marked runs side by side", self.action_compare)
        for key, mode, label in (("1", "workloads", "Workloads"), ("2", "plan", "Plan"), ("3", "run", "Run"),
                                 ("4", "runs", "Runs")):
            yield SystemCommand(f"Show {label}", f"Switch to the {label} view (key {key})",
                                partial(self.action_mode, mode))
        if isinstance(screen, PlanScreen):
            yield SystemCommand("Diff plans", "Diff this plan against another target's", screen.action_diff)
        yield SystemCommand("Help", "Show every key", self.action_help)

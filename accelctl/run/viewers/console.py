"""A console sink (rich): run header, phases, a progress bar with ETA, compact step lines,
warnings, and a summary table at the end.

On a terminal it draws a live progress bar; when stdout is not a terminal (CI, a pipe)
or with ``headless=True`` it prints plain lines only, no colour and no control codes.
Only rank 0 advances the progress bar and prints step lines; warnings and failures of
every rank are shown, tagged with their rank.
"""

from __future__ import annotations

import math
from typing import IO, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from accelctl.analysis import throughput
from accelctl.analysis.provenance import data_line, is_stand_in, model_line, what_ran
from accelctl.contract.events import (
    CheckpointSaved,
    LogMessage,
    PhaseChanged,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    StepMetrics,
)
from accelctl.contract.job import WorkerJob
from accelctl.exitcodes import closed_pipe
from accelctl.run.viewers.eta import eta

VERSION_KEYS = ("python", "torch", "transformers", "timm", "diffusers", "accelerate", "deepspeed", "datasets")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


def _num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:,.1f}{unit}" if abs(x) >= 100 else f"{x:.4g}{unit}"


def compile_line(results: dict) -> str:
    """Graph compilation (XLA) as the worker counted it, apart from the step times; "" if none."""
    if not results.get("compiles"):
        return ""
    line = f"compiled {results['compiles']} graph(s) in {results.get('compile_s', 0.0):.1f} s"
    if "recompiles" in results:
        line += (f" (warm-up {results['warmup_compiles']}, {results['warmup_compile_s']:.1f} s; measured phase "
                 f"{results['recompiles']} recompilation(s), {results['recompile_s']:.1f} s)")
    return line


class ConsoleSink:
    """Prints a run as it happens; ``close(result)`` prints the steady-state summary."""

    def __init__(
        self,
        job: WorkerJob | None = None,
        *,
        console: Console | None = None,
        headless: bool = False,
        every: int | None = None,
        file: IO[str] | None = None,
        rehearsal: Any = None,
    ):
        self.console = console or Console(file=file, highlight=False)
        self.plain = headless or not self.console.is_terminal
        #: a terminal's width: lines fold there at spaces (never inside
        #: a word); None in a pipe or a file: every line whole
        self.fold = self.console.width if self.console.is_terminal else None
        if self.plain and console is None:
            self.console = Console(file=file, highlight=False, no_color=True, force_terminal=False, soft_wrap=True)
        m = job.measure if job is not None else None
        self.total: int | None = m.warmup + m.steps * m.repeat if m is not None else None
        self.repeats = m.repeat if m is not None else 1
        self.device = job.device.kind if job is not None else "?"
        self.job = job
        self.rehearsal = rehearsal
        self.every = every or (max(1, self.total // 10) if self.total else 10)
        self.seen = 0
        #: rank 0's first measured step is printed whatever ``every`` says: the steady-state step
        #: time shows at once, not a tenth of a long run later
        self._first_measured_shown = False
        #: stdout's reader went away: nothing more is printed (accelctl run exits 141)
        self.reader_gone = False
        self._step_times: list[float] = []  # rank 0's, for the ETA of headless progress lines
        self._progress: Progress | None = None
        self._task: Any = None
        self._started = False
        self._early: list[PhaseChanged] = []  # phases reported before RunStarted

    # -- output helpers --------------------------------------------------------------

    def _print(self, text: str, style: str | None = None) -> None:
        line = Text(text, style=style or "")
        console = self._progress.console if self._progress is not None else self.console
        if self.fold:
            console.print(line, soft_wrap=False, width=self.fold, overflow="fold")
        else:
            console.print(line, soft_wrap=True)

    def _start_progress(self) -> None:
        if self.plain or self._progress is not None:
            return
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("steps", total=self.total)

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # -- events ------------------------------------------------------------------------

    def on_event(self, ev: Any) -> None:
        handler = getattr(self, f"_on_{type(ev).__name__}", None)
        if handler is not None and not self.reader_gone:
            self._unless_reader_gone(handler, ev)

    def _unless_reader_gone(self, fn, arg) -> None:
        """``fn(arg)``; a closed stdout (``accelctl run | head -3``) ends the stream quietly:
        the run goes on, and ``accelctl run`` exits 141 when it ends (``reader_gone``)."""
        try:
            fn(arg)
        except (BrokenPipeError, SystemExit) as exc:
            if not closed_pipe(exc):
                raise
            self.reader_gone = True
            self._progress = None

    def _on_RunStarted(self, ev: RunStarted) -> None:
        if ev.rank != 0:
            return
        self._print(f"run {ev.run_id}", "bold")
        env = ev.env
        self._print(
            f"  workload {ev.workload} · target {ev.target} · backend {ev.backend} · "
            f"device {env.get('device_name') or self.device} · world size {ev.world_size}"
        )
        versions = ", ".join(f"{k} {env[k]}" for k in VERSION_KEYS if k in env)
        if versions:
            self._print(f"  versions: {versions}", "dim")
        if env.get("cpu_model"):
            self._print(f"  cpu: {env['cpu_model']} ({env.get('cpu_count', '?')} cores, {env.get('threads', '?')} threads)", "dim")
        scalars = {k: v for k, v in ev.details.items() if isinstance(v, (str, int, float, bool))
                   and not k.startswith("data_")}
        if scalars:
            self._print("  " + ", ".join(f"{k}={v}" for k, v in scalars.items()), "dim")
        if self.job is not None:
            ran = what_ran(ev.details, self.job, self.rehearsal)
            self._print("  " + model_line(ran), "bold yellow" if is_stand_in(ran) else None)
            data = data_line(ran)
            if data:
                self._print("  " + data, "bold yellow" if "fallback" in ran["data"] else None)
        self._started = True
        self._start_progress()
        for early in self._early:
            self._on_PhaseChanged(early)
        self._early.clear()

    def _on_PhaseChanged(self, ev: PhaseChanged) -> None:
        if ev.rank != 0 or ev.phase == "done":
            return
        if not self._started:
            self._early.append(ev)
            return
        rep = f" (repeat {ev.repeat + 1}/{self.repeats})" if ev.phase == "measure" and self.repeats > 1 else ""
        self._print(f"· {ev.phase}{rep}", "cyan")
        if self._progress is not None:
            self._progress.update(self._task, description=ev.phase)

    def _on_StepMetrics(self, ev: StepMetrics) -> None:
        if ev.rank != 0:
            return
        self.seen += 1
        self._step_times.append(ev.step_time_s)
        if self._progress is not None:
            self._progress.advance(self._task)
        first_measured = ev.phase == "measure" and not self._first_measured_shown
        if first_measured:
            self._first_measured_shown = True
        if self.seen % self.every and self.seen != self.total and not first_measured:
            return
        of = f"/{self.total}" if self.total else ""
        parts = [f"step {self.seen}{of}", f"[{ev.phase}]"]
        if ev.loss is not None:
            parts.append(f"loss {ev.loss:.4f}")
        parts.append(_ms(ev.step_time_s))
        if ev.tokens_per_s is not None and (ev.new_tokens is not None or ev.samples_per_s is None):
            parts.append(f"{_num(ev.tokens_per_s)} tokens/s")
        elif ev.samples_per_s is not None:
            parts.append(f"{_num(ev.samples_per_s)} samples/s")
        if self.total and (left := eta(self._step_times, self.total - self.seen)):
            parts.append(left)  # steps left x median step time
        self._print("  ".join(parts))

    def _on_LogMessage(self, ev: LogMessage) -> None:
        level = ev.level.lower()
        if level == "debug":
            return
        tag = f"[rank {ev.rank}] " if ev.rank else ""
        style = {"warning": "yellow", "warn": "yellow", "error": "red"}.get(level, "dim")
        prefix = f"{level}: " if level != "info" else ""
        self._print(f"{tag}{prefix}{ev.message}", style)

    def _on_RunFailed(self, ev: RunFailed) -> None:
        lines = (ev.message or "").strip().splitlines() or [""]
        self._print(f"✗ rank {ev.rank} {ev.reason}: {lines[0]}", "bold red")
        detail = lines[1:] + (ev.traceback or "").strip().splitlines()
        for line in detail[-15:]:  # a crash's log tail, the end of a traceback
            self._print(f"    {line}", "dim")

    def _on_CheckpointSaved(self, ev: CheckpointSaved) -> None:
        self._print(f"⤓ checkpoint at step {ev.step}: {ev.path} ({ev.size_bytes / 2**20:.1f} MiB, "
                    f"{ev.save_s:.2f} s)", "blue")

    def _on_RunResumed(self, ev: RunResumed) -> None:
        if ev.rank != 0:
            return
        self._print(f"⤒ resumed from the checkpoint at step {ev.step}: {ev.path}", "blue")
        if self._progress is not None:
            self._progress.advance(self._task, ev.step - self.seen)
        self.seen = ev.step  # the step lines go on counting from the checkpoint

    def _on_RunFinished(self, ev: RunFinished) -> None:
        if ev.rank == 0:
            self._print(f"✓ finished {ev.steps} steps in {ev.wall_s:.2f} s", "green")
            line = compile_line(ev.results)
            if line:
                self._print(line, "yellow" if ev.results.get("recompiles") else None)

    # -- the end ------------------------------------------------------------------------

    def close(self, result: Any) -> None:
        if not self.reader_gone:
            self._unless_reader_gone(self._close, result)

    def _close(self, result: Any) -> None:
        self._stop_progress()
        rows = summary_rows(result.summary, result.run_dir)
        if self.plain:
            self.console.print("summary", soft_wrap=True)
            for label, value in rows:
                if self.fold:
                    self.console.print(f"  {label}: {value}", soft_wrap=False, width=self.fold, markup=False,
                                       highlight=False)
                else:
                    self.console.print(f"  {label}: {value}", soft_wrap=True, markup=False, highlight=False)
            return
        status = result.summary.get("status", "?")
        colour = {"ok": "green", "stopped": "yellow"}.get(status, "red")
        table = Table(title=f"run {status}", title_style=f"bold {colour}", show_header=False, box=None)
        table.add_column(style="bold")
        table.add_column()
        for label, value in rows:
            table.add_row(label, Text(value))
        self.console.print(table)


def summary_rows(summary: dict[str, Any], run_dir: Any = None) -> list[tuple[str, str]]:
    """The end-of-run table as (label, value) rows; shared by the plain and rich forms."""
    stats = summary.get("stats") or {}
    rows: list[tuple[str, str]] = [("status", str(summary.get("status", "?")))]
    failure = summary.get("failure")
    if failure:
        msg = (failure.get("message") or "").strip().splitlines()
        rows.append(("failure", f"{failure.get('reason')} (rank {failure.get('rank')}): {msg[0] if msg else ''}"))
    if summary.get("resumed"):
        rows.append(("resumed", ", ".join(f"after the checkpoint of step {r['step']}" for r in summary["resumed"])))
    st = stats.get("step_time")
    if st:
        rows.append(("step time", f"median {_ms(st['median'])} · mean {_ms(st['mean'])} · p90 {_ms(st['p90'])} ({st['count']} steps)"))
    value, unit = throughput.headline(stats, str(summary.get("task") or ""))
    if value is not None:
        rows.append(("throughput", f"{throughput.text(value, unit)} ({throughput.STATISTIC})"))
    gen = stats.get("generation")
    if gen:
        rows.append(("latency", f"median {_ms(gen['latency_median_s'])} · p90 {_ms(gen['latency_p90_s'])}"))
        if gen.get("ttft_median_s") is not None:
            rows.append(("first token", f"median {_ms(gen['ttft_median_s'])}"))
        if gen.get("per_token_median_s") is not None:
            rows.append(("per token", f"median {_ms(gen['per_token_median_s'])} · mean {_ms(gen['per_token_mean_s'])}"))
    loss = stats.get("loss")
    if loss:
        trend = {True: "decreased", False: "did not decrease", None: "too few steps"}[loss.get("decreased")]
        rows.append(("loss", f"{loss['first']:.4g} → {loss['last']:.4g} ({trend})"))
    if stats.get("warmup_steps"):
        rows.append(("warm-up", f"{stats['warmup_steps']} steps, {stats['warmup_time_s']:.3f} s (excluded from the figures above)"))
    wall = (summary.get("timings") or {}).get("wall_s")
    if wall is not None:
        rows.append(("wall time", f"{wall:.2f} s"))
    if run_dir is not None:
        rows.append(("run dir", str(run_dir)))
    rows += tracking_rows(summary)
    return rows


def tracking_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Where the runner logged the run live (``track { ... }``), and any tracker that failed."""
    where = summary.get("tracking") or {}
    rows = []
    mlflow, wandb = where.get("mlflow"), where.get("wandb")
    if mlflow is not None:
        rows.append(("logged to", f"MLflow {mlflow.get('uri')} (experiment {mlflow.get('experiment')})"))
    if wandb is not None:
        rows.append(("logged to", f"W&B offline, project {wandb.get('project')}: {wandb.get('sync')}"))
    if "tensorboard" in where:
        rows.append(("logged to", f"TensorBoard {where['tensorboard'].get('dir')}"))
    rows += [("tracking", w[len("tracking: "):]) for w in summary.get("warnings") or () if w.startswith("tracking: ")]
    return rows

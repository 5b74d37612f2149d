"""Panels of the run screen that show numbers: header, progress, stats, ranks, summary.

Each panel has one reactive attribute, ``model`` (the screen's ``RunModel``), set by the
screen after every batch of events; the panel re-renders from it.  Steady-state figures
come from ``RunModel.stats()`` (``accelctl.analysis.stats.steady_state``), never from
arithmetic here.
"""

from __future__ import annotations

from rich.console import Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from accelctl.analysis import throughput
from accelctl.analysis.stats import straggler
from accelctl.analysis.provenance import count_text, data_line, is_stand_in, model_line
from accelctl.tui import fmt

STATUS_STYLE = {"ok": "bold green", "failed": "bold red", "stopped": "bold yellow", "incomplete": "bold yellow",
                "running": "bold cyan", "waiting": "dim", "unreadable": "bold red"}


def status_style(status: str) -> str:
    """The style of a run status; ``unreadable: <reason>`` is styled as ``unreadable``."""
    return STATUS_STYLE.get(status.split(":", 1)[0], "")


class ModelPanel(Static):
    """A panel drawn from the run model (attributes down: the screen sets ``model``).

    It repaints only when ``signature(model)`` changed: a panel whose figures did not
    move costs nothing (the TUI shares the CPU with the run it watches)."""

    model = reactive(None, always_update=True, layout=False, repaint=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._signature: object = object()

    def signature(self, m) -> object:
        return m.version

    def _watch_model(self, m) -> None:
        sig = (id(m), self.signature(m)) if m is not None else None
        if sig != self._signature:
            self._signature = sig
            self.refresh()

    def render(self):
        return self.draw(self.model) if self.model is not None else Text("")

    def draw(self, model):  # pragma: no cover - overridden
        raise NotImplementedError


def _grid() -> Table:
    t = Table.grid(padding=(0, 1))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(no_wrap=True, overflow="ellipsis")
    return t


class RunHeader(ModelPanel):
    def signature(self, m):
        return (m.status, m.head is not None, m.world_size)

    def draw(self, m):
        head = m.head
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f" {m.status} ", STATUS_STYLE.get(m.status, "bold") + " reverse")
        workload, target, backend = (head.workload, head.target, head.backend) if head is not None else m.names
        if workload:
            t.append(f" {workload} › {target}", "bold")
            t.append(f" · {backend}")
        if head is not None:
            t.append(f" · {head.env.get('device_name') or head.env.get('device', '?')}")
            d = head.details
            if d.get("rehearsal_of"):
                t.append(f" · REHEARSAL of {d['rehearsal_of']}", "bold yellow")
            elif d.get("scale") == "stand_in":
                t.append(" · STAND-IN", "bold yellow")
            if d.get("params"):
                t.append(f" · {count_text(d['params'])}")
        if m.world_size > 1:
            t.append(f" · {m.world_size} ranks")
        t.append(f"  {m.run_id}", "dim")
        return t


class ProgressPanel(ModelPanel):
    def signature(self, m):
        # a live run's clock ticks every second, events or not (the setup phase sends none)
        return (m.version, int(m.progress().elapsed_s)) if m.live else m.version

    def draw(self, m):
        p = m.progress()
        t = Table.grid(padding=(0, 1), expand=True)
        t.add_column(ratio=1)
        t.add_column(no_wrap=True)
        total = p.total or max(p.done, 1)
        bar = ProgressBar(total=total, completed=min(p.done, total), complete_style="cyan", finished_style="green")
        phase = m.phase_label if m.live else m.status
        of = f"{p.done}/{p.total}" if p.total else f"{p.done}"
        eta = f" · eta {fmt.duration(p.eta_s)}" if m.live and p.eta_s is not None else ""
        t.add_row(bar, Text(f"{of} steps · {phase} · {fmt.duration(p.elapsed_s)}{eta}"))
        return t


class StatsPanel(ModelPanel):
    """Current / median / p90 step time, throughput, MFU, memory (or generation figures)."""

    def draw(self, m):
        st = m.stats()
        g = _grid()
        last = m.last
        d = st.step_time
        g.add_row("step", fmt.ms(m.current_step_s))
        g.add_row("median", fmt.ms(d.median) if d else "-")
        g.add_row("p90", fmt.ms(d.p90) if d else "-")
        g.add_row("warm-up", Text(f"{st.warmup_steps} excluded", style="yellow") if st.warmup_steps else Text("-"))
        gen = st.generation
        if m.is_generation:
            tps = gen.tokens_per_s_median if gen else (last.tokens_per_s if last else None)
            g.add_row("tokens/s", fmt.num(tps))
            per_tok = gen.per_token_median_s if gen else (last.per_token_s if last else None)
            g.add_row("per token", fmt.ms(per_tok, 2))
            g.add_row("1st token", fmt.ms(gen.ttft_median_s if gen else (last.ttft_s if last else None), 2))
        else:
            value, unit = throughput.headline(st.to_dict(), m.task)
            if value is not None:  # the median of the measured steps, as every surface shows it
                g.add_row(unit, throughput.number(value))
            elif last is not None and last.samples_per_s is not None:
                g.add_row("samples/s", fmt.num(last.samples_per_s))
            if last is not None and last.loss is not None:
                g.add_row("loss", f"{last.loss:.4f}")
        if last is not None and last.mfu is not None:
            g.add_row("MFU", fmt.pct(last.mfu))
        if last is not None and last.mem_bytes is not None:
            g.add_row("memory", fmt.nbytes(last.mem_bytes))
        return g


class RanksPanel(ModelPanel):
    """Per-rank step times of a multi-process run, the straggler marked; for a single
    process, what the worker resolved (model, parameters, precision, batch)."""

    def signature(self, m):
        multi = len(m.rank_steps) > 1 or m.world_size > 1
        return m.version if multi else m.head is not None

    def watch_model(self, m) -> None:  # (ModelPanel._watch_model decides on repainting)
        if m is None:
            return
        multi = len(m.rank_steps) > 1 or m.world_size > 1
        slow = straggler(m.stats()) if multi else None
        self.border_title = ("ranks" if multi else "process") + (
            f" · straggler {slow[0]} +{slow[1] * 100:.0f}%" if slow else "")

    def draw(self, m):
        if len(m.rank_steps) > 1 or m.world_size > 1:
            return self._ranks(m)
        head = m.head
        g = _grid()
        if head is None:
            return Text("waiting for the worker…", style="dim")
        det = head.details
        for key, label in (("family", "model"), ("params", "params"), ("weights", "weights"),
                           ("precision", "precision"),
                           ("global_batch", "batch"), ("seq_len", "seq len"), ("max_new_tokens", "new tokens")):
            if det.get(key) is not None:
                value = det[key]
                g.add_row(label, f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value))
        g.add_row("threads", str(head.env.get("threads", "?")))
        return g

    def _ranks(self, m):
        st = m.stats()
        t = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False, header_style="bold")
        for col in ("rank", "last", "median", "p90"):
            t.add_column(col, justify="right", no_wrap=True)
        medians = {r: d.median for r, d in st.per_rank.items()}
        slow = straggler(st)
        for r in sorted(m.rank_steps):
            steps = m.rank_steps[r]
            d = st.per_rank.get(r)
            style = "bold yellow" if slow is not None and r == slow[0] else ""
            t.add_row(Text(f"{r}{'◀' if style else ' '}", style=style), fmt.ms(steps[-1].step_time_s),
                      Text(fmt.ms(medians.get(r)), style=style), fmt.ms(d.p90) if d else "-")
        return t


class SummaryPanel(ModelPanel):
    """The end-of-run figures from ``summary.json``, compact (the console prints them in full)."""

    def signature(self, m):
        return (m.status, m.summary is not None)

    def draw(self, m):
        if m.summary is None:
            if m.live:
                return Text("")
            return Text(f"run {m.status}: no summary.json (the runner did not finish)", style="yellow")
        return Group(*summary_lines(m.summary))


def summary_lines(summary: dict) -> list[Text]:
    stats = summary.get("stats") or {}
    status = str(summary.get("status", "?"))
    out = []
    head = Text.assemble(("status ", "bold"), (status, STATUS_STYLE.get(status, "bold")))
    wall = (summary.get("timings") or {}).get("wall_s")
    if wall is not None:
        head.append(f" · wall {wall:.2f} s")
    failure = summary.get("failure")
    if failure:
        msg = (failure.get("message") or "").strip().splitlines()
        head.append(f" · {failure.get('reason')} (rank {failure.get('rank')}): {msg[0] if msg else ''}", "red")
    out.append(head)
    ran = summary.get("what_ran")
    if ran:
        out.append(Text(model_line(ran), style="bold yellow" if is_stand_in(ran) else ""))
        if data := data_line(ran):
            out.append(Text(data, style="bold yellow" if "fallback" in ran["data"] else ""))
    st = stats.get("step_time")
    if st:
        warm = f" · warm-up {stats.get('warmup_steps', 0)} excluded" if stats.get("warmup_steps") else ""
        out.append(Text.assemble(("step time ", "bold"), f"median {fmt.ms(st['median'], 2)} · mean "
                                 f"{fmt.ms(st['mean'], 2)} · p90 {fmt.ms(st['p90'], 2)} ({st['count']} steps){warm}"))
    value, unit = throughput.headline(stats, str(summary.get("task") or ""))
    if value is not None:
        out.append(Text.assemble(("throughput ", "bold"), f"{throughput.text(value, unit)} ({throughput.STATISTIC})"))
    gen = stats.get("generation")
    if gen:
        out.append(Text.assemble(("generation ", "bold"), f"per token {fmt.ms(gen.get('per_token_median_s'), 2)} · "
                                 f"first token {fmt.ms(gen.get('ttft_median_s'), 2)} (medians)"))
    loss = stats.get("loss")
    if loss:
        trend = {True: "decreased", False: "did not decrease", None: "too few steps"}[loss.get("decreased")]
        out.append(Text.assemble(("loss ", "bold"), f"{loss['first']:.4g} → {loss['last']:.4g} ({trend})"))
    for t in out:
        t.no_wrap, t.overflow = True, "ellipsis"
    return out

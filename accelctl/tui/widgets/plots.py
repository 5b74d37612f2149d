"""Plots over steps (plotext): step time, loss, per-token latency, throughput.

A ``SeriesPlot`` receives the ``RunModel`` as a reactive attribute and draws, for each
rank, the measured steps as a line and the warm-up steps as yellow crosses.  The y range
is fitted to the measured steps, so a slow first step (compilation, allocator warm-up)
does not flatten the curve: warm-up points above the range are drawn at its top edge.
The step-time plot also draws the steady-state median (from ``steady_state``).
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual_plotext import PlotextPlot

#: explicit RGB: plotext's named colours are remapped by the Textual theme
RANK_COLORS = ((86, 182, 194), (198, 120, 221), (152, 195, 121), (97, 175, 239), (224, 108, 117), (220, 220, 220),
               (209, 154, 102), (150, 150, 150))
WARMUP_RGB = (229, 192, 123)
MEDIAN_RGB = (152, 195, 121)
WARMUP_COLOR = "#e5c07b"

#: field -> (title, scale, unit)
FIELDS = {
    "step_time_s": ("step time", 1e3, "ms"),
    "loss": ("loss", 1.0, ""),
    "per_token_s": ("per-token latency", 1e3, "ms"),
    "tokens_per_s": ("tokens/s", 1.0, ""),
    "samples_per_s": ("samples/s", 1.0, ""),
}


class SeriesPlot(PlotextPlot):
    """One field of the step events over the step index; ``fields`` lists fallbacks in order
    (the first field any step reports is drawn)."""

    model = reactive(None, always_update=True, layout=False)

    def __init__(self, *fields: str, median: bool = False, max_ranks: int = 8, **kwargs):
        super().__init__(**kwargs)
        self.fields = fields
        self.median = median
        self.max_ranks = max_ranks
        self.field = fields[0]

    def _pick(self, model) -> str:
        for f in self.fields:
            if any(getattr(s, f) is not None for s in model.rank0):
                return f
        return self.fields[0]

    def watch_model(self, model) -> None:
        if model is None:
            return
        field = self._pick(model)
        title, _, unit = FIELDS.get(field, (field, 1.0, ""))
        self.field = field
        warm = sum(1 for s in model.rank0 if s.phase != "measure")
        self.border_title = (f"{title} ({unit})" if unit else title) + (
            f" · [{WARMUP_COLOR}]x[/] warm-up: {warm} excluded" if warm else "")

    def render(self):
        model = self.model
        if model is None or not model.rank0:
            return Text("waiting for the first step…", style="dim", justify="center")
        plt = self.plt
        plt.clear_figure()
        _, scale, _ = FIELDS.get(self.field, (self.field, 1.0, ""))
        # every rank's step time (a straggler shows), rank 0's for the rest (loss is global)
        ranks = sorted(model.rank_steps)[: self.max_ranks] if self.field == "step_time_s" else [min(model.rank_steps)]
        series = {r: model.series(self.field, r) for r in ranks}
        measured = [y * scale for _, meas in series.values() for _, y in meas]
        warm_all = [y * scale for warm, _ in series.values() for _, y in warm]
        if not measured and not warm_all:
            return Text(f"no {self.field} reported", style="dim", justify="center")
        basis = measured or warm_all
        lo, hi = min(basis), max(basis)
        pad = (hi - lo) * 0.1 or abs(hi) * 0.05 or 1.0
        # a series that cannot go negative (times, losses, rates, MFU) keeps its axis at or above 0
        lo, hi = (max(lo - pad, 0.0) if lo >= 0 else lo - pad), hi + pad
        for r in ranks:
            warm, meas = series[r]
            color = RANK_COLORS[r % len(RANK_COLORS)]
            if meas:
                plt.plot([x for x, _ in meas], [y * scale for _, y in meas], marker="braille", color=color)
            if warm:
                plt.scatter([x for x, _ in warm], [min(hi, max(lo, y * scale)) for _, y in warm], marker="x",
                            color=WARMUP_RGB)
        if self.median and measured:
            st = model.stats().step_time
            if st is not None:
                plt.hline(st.median * scale, MEDIAN_RGB)
        n = max(len(model.rank_steps[r]) for r in ranks)
        plt.xlim(0.5, max(n, model.total_steps or 0) + 0.5)
        plt.ylim(lo, hi)
        plt.xticks(sorted({1, max(1, n // 2), n}))
        plt.frame(False)
        return super().render()


class ComparePlot(PlotextPlot):
    """Measured step times of two runs (the report entry's: the straggler's time of each step)
    over their step index, one line each (A cyan, B magenta)."""

    def __init__(self, sides, **kwargs):
        super().__init__(**kwargs)
        self.sides = sides

    def render(self):
        plt = self.plt
        plt.clear_figure()
        xs_max, drawn = 1, False
        for side, color in zip(self.sides, RANK_COLORS[:2], strict=False):
            times = side.entry.step_times  # measured, the straggler's time of each step
            if times:
                drawn = True
                plt.plot(list(range(1, len(times) + 1)), [t * 1e3 for t in times], marker="braille", color=color)
                xs_max = max(xs_max, len(times))
            med = side.median_s
            if med:
                plt.hline(med * 1e3, color)
        if not drawn:
            return Text("no measured steps to plot", style="dim", justify="center")
        highest = max(t * 1e3 for side in self.sides for t in (side.entry.step_times or [0.0]))
        plt.ylim(0.0, highest * 1.1 or 1.0)  # step times: never an axis below zero
        plt.xticks(sorted({1, max(1, xs_max // 2), xs_max}))
        plt.frame(False)
        return super().render()

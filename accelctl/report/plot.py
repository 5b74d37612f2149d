"""A PNG of a report: step time and throughput per target, and the scaling curve.

matplotlib (the ``report`` extra) is imported here only, with the Agg backend.
The format is the file's extension (``plot_format``: .png, .svg, .pdf, ...; none: PNG under the
name as given); the file is drawn in memory and written whole or not at all (``_save``): a place
that cannot take it is exit 1, one line naming the path and the errno.
Each bar is labelled with its workload, target (and device count) and run (``bar_labels``).
Panels: mean step time per entry with its 95 % CI as error bars; throughput per entry,
one panel per unit; when the entries measure a workload at two or more device counts
(or a publication's scaling table is given), scaling efficiency against devices (ideal = 100 %).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelctl.errors import AccelctlError
from accelctl.report.entry import Entry
from accelctl.report.exportpath import refusal, shown, write_file
from accelctl.report.scaling import ScaleRow


def plot_format(path: str | Path) -> str:
    """The format ``path`` is drawn in: its extension, PNG where it has none; an extension
    matplotlib does not write is exit 1 (``AccelctlError``) naming the path and the formats."""
    from matplotlib.backend_bases import FigureCanvasBase

    ext = Path(path).suffix[1:].lower()
    known = FigureCanvasBase.get_supported_filetypes()
    if ext and ext not in known:
        raise AccelctlError(f"--plot: cannot write {shown(path)}: .{ext} is not a format matplotlib writes "
                            f"({', '.join(sorted(known))})")
    return ext or "png"


def _save(fig: Any, path: str | Path, **options: Any) -> Path:
    """Draw ``fig`` in ``path``'s format and write it there whole (the folders missing above it
    made), or raise the ``AccelctlError`` (exit 1) naming the path: drawn in memory first, then
    ``exportpath.write_file``, so a failed write leaves no file, no folder, and an earlier file
    as it was."""
    import io

    fmt = plot_format(path)
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format=fmt, **options)
    except RuntimeError as exc:  # a format whose tool is missing (pgf: a TeX)
        raise AccelctlError(f"--plot: cannot draw {shown(path)} as {fmt}: {str(exc).splitlines()[0]}") from None
    try:
        write_file(path, buffer.getvalue(), make_folders=True)
    except OSError as exc:
        raise refusal("--plot", path, exc, "write") from None
    return Path(path)


def _clip(text: str, most: int = 18) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def bar_labels(entries: Sequence[Entry]) -> list[str]:
    """Each bar's label: the workload, the target with its device count, and the run (its
    short id, unique among the bars; a published figure its publication's name), one per line:
    ``fixture_train`` / ``small · 1 dev`` / ``run 0001``."""
    from accelctl.report.width import short_ids

    runs = [e.source for e in entries if e.source and not e.publication]
    ids = short_ids([r.split(" ")[0] for r in runs])
    out = []
    for e in entries:
        if e.publication:
            run = e.publication
        elif e.source:
            run = "run " + ids.get(e.source.split(" ")[0], e.source)
        else:
            run = ""
        lines = [_clip(e.workload), f"{_clip(e.name)} · {e.devices or '?'} dev", run]
        out.append("\n".join(line for line in lines if line))
    return out


def _bars(ax, entries: Sequence[Entry], values: list[float], color: str, err=None) -> None:
    ax.bar(range(len(entries)), values, yerr=err, capsize=4 if err else 0, color=color)
    many = len(entries) > 8
    ax.set_xticks(range(len(entries)), [label.replace("\n", " · ") if many else label for label in bar_labels(entries)],
                  fontsize=7, rotation=35 if many else 0, ha="right" if many else "center")
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 50:
        ax.set_yscale("log")


def plot_report(entries: Sequence[Entry], path: str | Path, scaling: Sequence[tuple[str, Sequence[ScaleRow]]] = (),
                title: str = "accelctl report") -> Path:
    """Write the figure (``_save``) and return its path; raises ``ModuleNotFoundError`` without matplotlib.

    Panels: step time (with CI error bars), one throughput panel per unit (so that
    samples/s and tokens/s never share an axis), then the scaling curves.  A panel whose
    values span more than 50x uses a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [e for e in entries if e.step_time_s is not None]
    units = sorted({e.unit for e in entries if e.throughput is not None})
    curves = [(name, rows) for name, rows in scaling if len(rows) >= 2]
    panels: list[tuple[str, Any]] = [("time", timed)] if timed else []
    panels += [("rate", [e for e in entries if e.throughput is not None and e.unit == u]) for u in units]
    panels += [("scale", curves)] if curves else []
    if not panels:
        raise ValueError("nothing to plot: no entry has a step time or a throughput")
    widest = max(len(p[1]) for p in panels if p[0] != "scale") if any(p[0] != "scale" for p in panels) else 4
    size = (min(16.0, max(6.0, 1.2 * widest)), 3.6 * len(panels) + (2.0 if widest > 8 else 0.4))
    fig, axes = plt.subplots(len(panels), 1, figsize=size, squeeze=False)
    for ax, (panel, items) in zip(axes[:, 0], panels):
        if panel == "time":
            err = [[(e.step_time_s - e.step_time_ci.low) * 1e3 if e.step_time_ci else 0 for e in items],
                   [(e.step_time_ci.high - e.step_time_s) * 1e3 if e.step_time_ci else 0 for e in items]]
            _bars(ax, items, [e.step_time_s * 1e3 for e in items], "#4C72B0", err)
            ax.set_ylabel("step time (ms)")
            ax.set_title("steady-state mean step time (95% CI)", fontsize=10)
        elif panel == "rate":
            _bars(ax, items, [e.throughput for e in items], "#55A868")
            ax.set_ylabel(items[0].unit)
            ax.set_title(f"throughput ({items[0].unit})", fontsize=10)
        else:
            top, ticks = 1.0, set()
            for name, rows in items:
                xs = [r.point.accelerators for r in rows]
                ticks.update(xs)
                ax.plot(xs, [r.efficiency * 100 for r in rows], marker="o", label=name)
                top = max(top, *(r.efficiency for r in rows))
            ax.axhline(100, color="grey", linestyle="--", linewidth=1, label="ideal")
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(ticks), [str(t) for t in sorted(ticks)])
            ax.minorticks_off()
            ax.set_xlabel("devices")
            ax.set_ylabel("scaling efficiency (%)")
            ax.set_ylim(0, max(105, top * 100 + 5))
            ax.set_title("scaling efficiency (per-device throughput / baseline's)", fontsize=10)
            ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    try:
        return _save(fig, path, dpi=110)
    finally:
        plt.close(fig)


def plot_front(points: Sequence[tuple[float, float, bool, str]], path: str | Path, title: str) -> Path:
    """``accelctl sweep --estimate --plot``: one dot per (job hours, job USD, on the front,
    label), the Pareto front joined and labelled; raises ``ModuleNotFoundError`` without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.scatter([p[0] for p in points], [p[1] for p in points],
               c=["tab:red" if p[2] else "tab:gray" for p in points])
    front = sorted((p for p in points if p[2]), key=lambda p: p[0])
    ax.plot([p[0] for p in front], [p[1] for p in front], color="tab:red", label="Pareto front")
    for hours, usd, _, label in front:
        ax.annotate(_clip(label, 48), (hours, usd), fontsize=7)
    ax.set_xlabel("job time (h)")
    ax.set_ylabel("job cost (USD)")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)

"""A PNG of a report: step time and throughput per target, and the scaling curve.

matplotlib (the ``report`` extra) is imported here only, with the Agg backend.
Panels: (1) mean step time per entry with its 95 % CI as error bars; (2) throughput per
entry; (3) when the entries measure one workload at two or more device counts,
scaling efficiency against devices (ideal = 100 %).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from accelctl.report.entry import Entry
from accelctl.report.scaling import ScaleRow


def _label(e: Entry) -> str:
    tail = e.source[-4:] if e.source and not e.source.startswith("seed") else e.source
    return f"{e.name}\n{tail}" if tail else e.name


def plot_report(entries: Sequence[Entry], path: str | Path, scaling: Sequence[tuple[str, Sequence[ScaleRow]]] = (),
                title: str = "accelctl report") -> Path:
    """Write the PNG and return its path; raises ``ModuleNotFoundError`` without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [e for e in entries if e.step_time_s is not None]
    rated = [e for e in entries if e.throughput is not None]
    curves = [(name, rows) for name, rows in scaling if len(rows) >= 2]
    panels = [p for p, on in (("time", timed), ("rate", rated), ("scale", curves)) if on]
    if not panels:
        raise ValueError("nothing to plot: no entry has a step time or a throughput")
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(6.0, 1.1 * max(len(timed), len(rated), 4)), 3.6 * len(panels)),
                             squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        if panel == "time":
            ys = [e.step_time_s * 1e3 for e in timed]
            err = [[(e.step_time_s - e.step_time_ci.low) * 1e3 if e.step_time_ci else 0 for e in timed],
                   [(e.step_time_ci.high - e.step_time_s) * 1e3 if e.step_time_ci else 0 for e in timed]]
            ax.bar(range(len(timed)), ys, yerr=err, capsize=4, color="#4C72B0")
            ax.set_xticks(range(len(timed)), [_label(e) for e in timed], fontsize=8)
            ax.set_ylabel("step time (ms)")
            ax.set_title("steady-state mean step time (95% CI)", fontsize=10)
        elif panel == "rate":
            ax.bar(range(len(rated)), [e.throughput for e in rated], color="#55A868")
            ax.set_xticks(range(len(rated)), [_label(e) for e in rated], fontsize=8)
            units = sorted({e.unit for e in rated})
            ax.set_ylabel(" | ".join(units))
            ax.set_title("throughput", fontsize=10)
        else:
            top = 1.0
            for name, rows in curves:
                xs = [r.point.accelerators for r in rows]
                ax.plot(xs, [r.efficiency * 100 for r in rows], marker="o", label=name)
                top = max(top, *(r.efficiency for r in rows))
            ax.axhline(100, color="grey", linestyle="--", linewidth=1, label="ideal")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("devices")
            ax.set_ylabel("scaling efficiency (%)")
            ax.set_ylim(0, max(105, top * 100 + 5))
            ax.set_title("scaling efficiency (per-device throughput / baseline's)", fontsize=10)
            ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

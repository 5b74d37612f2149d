"""``accelctl estimate`` output: a plain-text table per workload (every target, its bound and
why, the memory fit, the cost) or one JSON record per target.  No rich: the command must
start and finish in well under a second.

``text(..., width)`` fits a terminal of ``width`` columns (``accelctl.report.width``'s rules,
in plain text): the table's columns are left out by ``PRIORITY`` (cost first, then the bound)
until it fits, with a note naming them; the prose lines wrap at spaces under their own
indent (a word is never cut).  ``width=None`` (a pipe, a file, ``--wide``): every line whole,
as before."""

from __future__ import annotations

import json
import textwrap

from accelctl.estimate.roofline import Estimate


def _num(v: float | None, fmt: str = "{:.4g}") -> str:
    return "-" if v is None else fmt.format(v)


def _time(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"


def _rate(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


HEADERS = ("target", "device", "step/latency", "throughput", "bound by", "memory", "usd/h", "units/usd",
           "job")
#: per column of ``HEADERS``: 0 kept longest, the highest left out first on a narrow terminal
PRIORITY = (0, 2, 0, 1, 3, 1, 6, 5, 4)


def _row(e: Estimate) -> tuple[str, ...]:
    if e.status == "refused":
        return (e.target, f"{e.device} x{e.devices}", "-", "-", _refused(e), "-", "-", "-", "-")
    if e.status != "ok":
        return (e.target, e.device, "-", "-", "-", "-", "-", "-", "-")
    job = "-"
    if e.projected_hours is not None:
        job = f"{e.projected_hours:.3g} h" + (f" ${e.projected_cost_usd:,.0f}" if e.projected_cost_usd else "")
    return (e.target, f"{e.device} x{e.devices}", _time(e.latency_s if e.task == "generate" else e.step_time_s),
            f"{_rate(e.throughput)} {e.unit}" if e.throughput else "-", e.bound_by,
            "fits" if e.fits else "DOES NOT FIT", _num(e.price_per_hour, "{:.2f}"),
            _num(e.throughput_per_dollar, "{:,.0f}"), job)


def _refused(e: Estimate) -> str:
    """``refused E520`` (``refused`` where plan's refusal had no code)."""
    return f"refused {e.refusal['code']}".rstrip()


def not_estimated(spec, e: Estimate):
    """E580 (a warning): why a target has no estimate, at the line that declares it."""
    from accelctl.errors import Diagnostic

    return Diagnostic("E580", f"target {e.target}: no estimate: {e.status}", spec.origins.get(f"targets.{e.target}"),
                      spec.path, "accelctl estimate needs the device's datasheet (accelctl/catalog.py "
                      "DATASHEETS)", severity="warning")


def _table(rows: list[tuple[str, ...]], width: int | None) -> tuple[list[str], list[str]]:
    """The table's lines, and the headers of the columns left out to fit ``width``."""
    keep = list(range(len(HEADERS)))
    widths = [max(len(r[i]) for r in rows) for i in keep]
    dropped: list[str] = []

    def total() -> int:
        return 2 + sum(widths[i] for i in keep) + 2 * (len(keep) - 1)

    while width is not None and total() > width and len(keep) > 2:
        worst = max(keep, key=lambda i: (PRIORITY[i], i))
        if PRIORITY[worst] == 0:
            break
        keep.remove(worst)
        dropped.append(HEADERS[worst])
    lines = []
    for n, r in enumerate(rows):
        lines.append("  " + "  ".join(r[i].ljust(widths[i]) for i in keep).rstrip())
        if n == 0:
            lines.append("  " + "  ".join("-" * widths[i] for i in keep))
    return lines, dropped


def _wrap(line: str, width: int | None, more: int = 2) -> list[str]:
    """``line`` wrapped at spaces to ``width``, the lines after the first indented ``more``
    further than it (a word longer than the line stays whole); whole when None."""
    if width is None or len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip(" ")))
    return textwrap.wrap(line, width=width, initial_indent="", subsequent_indent=indent + " " * more,
                         break_long_words=False, break_on_hyphens=False) or [line]


def text(workload: str, estimates: list[Estimate], spec=None, width: int | None = None) -> str:
    rows = [HEADERS, *(_row(e) for e in estimates)]
    table, dropped = _table(rows, width)
    lines = _wrap(f"workload {workload}: estimated (roofline with overlap; no run)", width)
    lines += table
    if dropped:
        lines += _wrap(f"  left out at this width: {', '.join(dropped)} (--wide shows every column)", width)
    for e in estimates:
        if e.status == "refused":  # plan's own words, as `plan` prints them under its row
            lines += _wrap(f"  {e.target}: {_refused(e)}: {e.refusal['message']}", width)
            if e.refusal.get("hint"):
                lines += _wrap(f"    hint: {e.refusal['hint']}", width)
            continue
        if e.status != "ok":
            lines.append("  " + (not_estimated(spec, e).render(None if width is None else width - 2)
                                 if spec is not None else e.status).replace("\n", "\n  "))
            continue
        lines += _wrap(f"  {e.target}: {e.why}", width)
        if "ASSUMPTION" in e.sources.get("peak", ""):
            lines += _wrap(f"    peak: {e.sources['peak']}", width)
        if e.basis == "stand-in":
            lines += _wrap("    estimated on the stand-in's shape: the catalog does not know the real model's "
                           "architecture (write it: model <family>(layers = ..., hidden = ...))", width)
        if e.status == "ok" and not e.fits:
            lines += _wrap(f"    {e.memory_fit}", width)
    prices: dict[str, list[str]] = {}
    for e in estimates:
        if e.status == "ok" and e.price_source:
            prices.setdefault(e.price_source, []).append(e.target)
    for where, names in prices.items():
        lines += _wrap(f"  price of {', '.join(names)}: {where}", width)
    basis = next((e.work_basis for e in estimates if e.status == "ok" and e.projected_hours is not None), "")
    if basis:
        lines += _wrap(f"  job = {basis} on every target (equal work): time = samples / throughput", width)
    groups: dict[tuple[str, ...], list[str]] = {}
    for e in estimates:
        if e.status == "ok":
            src = e.sources
            groups.setdefault((src["mfu"], src["bandwidth_efficiency"], src["layer_overhead"]), []).append(e.target)
    for (mfu, bw, host), names in groups.items():
        fitted = "fitted" in mfu or "fitted" in bw or "fitted" in host
        who = "" if len(groups) == 1 and not fitted else f" ({', '.join(names)})"
        lines += _wrap(f"  {'calibrated' if fitted else 'factors'}{who}: MFU " + mfu, width, 11)
        lines += _wrap("           bandwidth " + bw, width)
        lines += _wrap("           host time " + host, width)
    return "\n".join(lines)


def json_records(estimates: list[Estimate]) -> str:
    return "\n".join(json.dumps(e.record(), sort_keys=True) for e in estimates)

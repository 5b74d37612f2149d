"""``accelctl estimate`` output: a plain-text table per workload (every target, its bound and
why, the memory fit, the cost) or one JSON record per target.  No rich: the command must
start and finish in well under a second."""

from __future__ import annotations

import json

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


def _row(e: Estimate) -> tuple[str, ...]:
    if e.status != "ok":
        return (e.target, e.device, "-", "-", "-", "-", "-", "-", "-")
    job = "-"
    if e.projected_hours is not None:
        job = f"{e.projected_hours:.3g} h" + (f" ${e.projected_cost_usd:,.0f}" if e.projected_cost_usd else "")
    return (e.target, f"{e.device} x{e.devices}", _time(e.latency_s if e.task == "generate" else e.step_time_s),
            f"{_rate(e.throughput)} {e.unit}" if e.throughput else "-", e.bound_by,
            "fits" if e.fits else "DOES NOT FIT", _num(e.price_per_hour, "{:.2f}"),
            _num(e.throughput_per_dollar, "{:,.0f}"), job)


def not_estimated(spec, e: Estimate):
    """E580 (a warning): why a target has no estimate, at the line that declares it."""
    from accelctl.errors import Diagnostic

    return Diagnostic("E580", f"target {e.target}: no estimate: {e.status}", spec.origins.get(f"targets.{e.target}"),
                      spec.path, "accelctl estimate needs the device's datasheet (accelctl/spec/catalog.py "
                      "DATASHEETS)", severity="warning")


def text(workload: str, estimates: list[Estimate], spec=None) -> str:
    rows = [HEADERS, *(_row(e) for e in estimates)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = [f"workload {workload}: estimated (roofline with overlap; no run)"]
    for i, r in enumerate(rows):
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    for e in estimates:
        if e.status != "ok":
            lines.append("  " + (not_estimated(spec, e).render() if spec is not None else e.status)
                         .replace("\n", "\n  "))
            continue
        lines.append(f"  {e.target}: {e.why}")
        if "ASSUMPTION" in e.sources.get("peak", ""):
            lines.append(f"    peak: {e.sources['peak']}")
        if e.basis == "stand-in":
            lines.append("    estimated on the stand-in's shape: the catalog does not know the real model's "
                         "architecture (write it: model <family>(layers = ..., hidden = ...))")
        if e.status == "ok" and not e.fits:
            lines.append(f"    {e.memory_fit}")
    groups: dict[tuple[str, ...], list[str]] = {}
    for e in estimates:
        if e.status == "ok":
            src = e.sources
            groups.setdefault((src["mfu"], src["bandwidth_efficiency"], src["layer_overhead"]), []).append(e.target)
    for (mfu, bw, host), names in groups.items():
        fitted = "fitted" in mfu or "fitted" in bw or "fitted" in host
        who = "" if len(groups) == 1 and not fitted else f" ({', '.join(names)})"
        lines.append(f"  {'calibrated' if fitted else 'factors'}{who}: MFU " + mfu)
        lines.append("           bandwidth " + bw)
        lines.append("           host time " + host)
    return "\n".join(lines)


def json_records(estimates: list[Estimate]) -> str:
    return "\n".join(json.dumps(e.record(), sort_keys=True) for e in estimates)

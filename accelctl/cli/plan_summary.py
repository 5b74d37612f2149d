"""``accelctl plan FILE``: a summary when the file plans more than one target -- one row per
workload x target: backend, engine, devices, parameters, memory per device and whether it fits, and the
first launch command (a refused target: its code and words) -- and the full plans with
``--full`` or ``-t`` (a many-target file's full plans run to a thousand lines).

On a terminal the table fits its width (the launch command is cut with ``…``); in a pipe every
row is whole, as every other text output of accelctl.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelctl.plan.memory import fmt_bytes, fmt_params, host_memory_bytes


@dataclass
class Row:
    workload: str
    target: str
    backend: str = "—"
    engine: str = "—"
    devices: str = "—"
    params: str = "—"
    memory: str = "—"
    launch: str = ""


def planned(spec, target, plan) -> Row:
    facts = plan.facts
    fit = params = "—"
    if facts is not None and facts.memory_per_device:
        m = facts.memory_per_device
        cap = fmt_bytes(m["capacity"]) if m["capacity"] > 0 else fmt_bytes(host_memory_bytes())
        fit = f"{fmt_bytes(m['total'])} / {cap} {'fits' if facts.fits else 'DOES NOT FIT'}"
        params = fmt_params(facts.params) if facts.params else "—"
    first = plan.launches[0].shell() if plan.launches else ""
    more = f"  (+{len(plan.launches) - 1} more)" if len(plan.launches) > 1 else ""
    return Row(spec.name, target.name, plan.backend, plan.engine, f"{target.world_size} x {plan.device}", params,
               fit, "$ " + first + more)


def refused(spec, target, exc) -> Row:
    d = exc.diagnostics[0] if getattr(exc, "diagnostics", None) else None
    why = f"refused {d.code}: {d.message}" if d else f"refused: {exc}"
    return Row(spec.name, target.name, launch=why)


def render(rows: list[Row], width: int | None) -> str:
    """One line of columns per plan and, under it, its first launch command (or its refusal)
    indented; on a terminal each line is cut to ``width`` with ``…``, in a pipe whole."""
    one = len({r.workload for r in rows}) == 1  # one workload: named once, above the table
    heads = ("workload", "target", "backend", "engine", "devices", "params", "memory per device")[one:]
    cells = [(r.workload, r.target, r.backend, r.engine, r.devices, r.params, r.memory)[one:] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]

    def cut(text: str) -> str:
        text = text.rstrip()
        return text[:max(width - 1, 0)] + "…" if width is not None and len(text) > width else text

    def line(values) -> str:
        return cut("  ".join(v.ljust(w) for v, w in zip(values, widths)))

    out = [f"workload {rows[0].workload}"] if one else []
    out += [line(heads), line(tuple("-" * len(h) for h in heads))]
    for r, c in zip(rows, cells):
        out += [line(c), cut(f"    {r.launch}")]
    out += ["", cut("whole plans: -t TARGET (one), --full (all); -f json / sh are always whole")]
    return "\n".join(out)

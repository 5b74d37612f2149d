"""What a run ran: the model (architecture, parameter count, real or stand-in, where the
weights came from), the data (source, records), and whether it was a CPU rehearsal of an
accelerator target.  summary.json, the console, the TUI and the reports all read it here,
so a stand-in or a rehearsal is never shown as the real thing.
"""

from __future__ import annotations

from typing import Any

DATA_KEYS = ("source", "format", "config", "split", "records", "rank_records", "column", "target_column",
             "fallback", "fallback_reason", "wanted")


def what_ran(details: dict[str, Any], job: Any, rehearsal: Any = None) -> dict[str, Any]:
    """From the worker's ``RunStarted`` details, the job and the plan's rehearsal (if any)."""
    model = {
        "family": details.get("family", job.model.family),
        "params": details.get("params"),
        "scale": details.get("scale", job.scale),
        "weights": details.get("weights"),
        "weights_source": details.get("weights_source"),
        "architecture": details.get("shape", job.architecture),
        "names": job.model.ref or None,
    }
    data = {k: details[f"data_{k}"] for k in DATA_KEYS if f"data_{k}" in details}
    data.setdefault("source", details.get("data", job.data.kind))
    out: dict[str, Any] = {"model": model, "data": data, "rehearsal": None}
    if rehearsal is not None:
        out["rehearsal"] = rehearsal if isinstance(rehearsal, dict) else {
            "of": rehearsal.of, "device": rehearsal.device, "world_size": rehearsal.world_size,
            "changes": list(rehearsal.changes), "on": rehearsal.on}
    elif getattr(job, "rehearsal_of", "") or details.get("rehearsal_of"):
        out["rehearsal"] = {"of": getattr(job, "rehearsal_of", "") or details["rehearsal_of"]}
    return out


def count_text(n: float | None) -> str:
    if not n:
        return "? params"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit} params"
    return f"{n:.0f} params"


def is_stand_in(ran: dict[str, Any] | None) -> bool:
    """A run of the stand-in (a cpu target's small model, or any rehearsal)."""
    if not ran:
        return False
    return bool(ran.get("rehearsal")) or (ran.get("model") or {}).get("scale") == "stand_in"


def model_line(ran: dict[str, Any]) -> str:
    """One line for the run header: what model ran, loudly when it is not the real one."""
    m = ran.get("model") or {}
    arch = ", ".join(f"{k}={v}" for k, v in (m.get("architecture") or {}).items()
                     if isinstance(v, (int, float, str)))
    what = f"{m.get('family', '?')}({arch}), {count_text(m.get('params'))}, weights: {m.get('weights_source') or '?'}"
    r = ran.get("rehearsal")
    if r:
        where = f" ({r['world_size']} x {r['device']})" if r.get("device") else ""
        return (f"REHEARSAL of target {r['of']}{where} on {r.get('on') or 'this CPU'} with the stand-in {what}: "
                "not the target's model")
    if m.get("scale") == "stand_in":
        real = f" -- not {m['names']}" if m.get("names") else ""
        return f"STAND-IN model {what}{real}"
    return f"model {what}"


def data_line(ran: dict[str, Any]) -> str:
    """What data a run read, or "" for synthetic data."""
    d = ran.get("data") or {}
    if "fallback" in d:
        return (f"data: {d.get('source', d['fallback'])} -- FALLBACK: {d.get('wanted', 'the dataset')} "
                f"could not be loaded ({d.get('fallback_reason', '?')})")
    if d.get("source", "synthetic") == "synthetic" and "records" not in d:
        return ""
    where = ", ".join(f"{k} {d[k]}" for k in ("format", "config", "split") if d.get(k))
    out = f"data: {d['source']}" + (f" ({where})" if where else "")
    if "records" in d:
        out += f" · {d['records']:,} records, {d.get('rank_records', d['records']):,} on rank 0"
    if d.get("column"):
        out += f" · column {d['column']}" + (f" -> {d['target_column']}" if d.get("target_column") else "")
    return out

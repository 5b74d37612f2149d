"""The device check's record (``device-check.json``) and its Markdown table (``device-check.md``).

One row per part: what ran (model, precision, parameters), the measured figure (median step
time, or median latency of one generate call), the seed's figure beside it, the estimate
before the runs (catalog factors) and after ``--calibrate`` (fitted to these runs), and the
comparisons the issue asks for: compile speed-up over eager and compile time apart, FP8 over
bf16, ZeRO-2 against DDP.
"""

from __future__ import annotations

from typing import Any

from bench.device.parts import PARTS

KINDS = {"device": "MEASURED on the device",
         "cpu-smoke": "CPU SMOKE: the parts rehearsed on a CPU with stand-in shapes; not a measurement of the device",
         "dry": "DRY: plans, estimates and the wheel list checked; nothing ran",
         "sample": "SAMPLE: a recorded sample rendered by --dry; not a measurement of the device"}


def measured_s(row: dict[str, Any]) -> float | None:
    """Median step time, or median latency of one generation (the step of a generate run)."""
    stats = (row.get("summary") or {}).get("stats") or {}
    gen = stats.get("generation") or {}
    value = gen.get("latency_median_s") if gen else (stats.get("step_time") or {}).get("median")
    return float(value) if value is not None else None


def predicted_s(record: dict[str, Any] | None) -> float | None:
    if not record:
        return None
    value = record.get("latency_s") if record.get("latency_s") is not None else record.get("step_time_s")
    return float(value) if value is not None else None


def figures(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the table, computed from the record (parts, estimates before and after)."""
    parts = record.get("parts", {})
    before, after = record.get("estimate_before", {}), record.get("estimate_after", {})
    rows = []
    for part in PARTS:
        row = parts.get(part.name)
        out: dict[str, Any] = {"part": part.name, "what": part.what, "file": f"workloads/device/{part.file}"}
        if row is None:
            out["status"] = "not run"
            out["why"] = (record.get("skipped") or {}).get(part.name, "not reached")
            rows.append(out)
            continue
        summary = row.get("summary") or {}
        out["status"] = summary.get("status") or ("timed out" if row.get("timed_out") else f"exit {row.get('exit')}")
        if row.get("timed_out"):
            out["why"] = f"stopped at its timeout, {row.get('seconds')} s"
        elif summary.get("failure"):
            out["why"] = str(summary["failure"].get("message") if isinstance(summary["failure"], dict)
                             else summary["failure"])[:300]
        elif row.get("error"):
            out["why"] = row["error"][:300]  # no run folder: accelctl refused (a diagnostic) or did not start
        t = measured_s(row)
        out["measured_s"] = t
        out["run_id"] = row.get("run_id")
        out["precision"] = (summary.get("details") or {}).get("precision")
        out["params"] = ((summary.get("what_ran") or {}).get("model") or {}).get("params")
        results = summary.get("results") or {}
        if "compile_s" in results:
            out["compile_s"] = results.get("warmup_compile_s", results["compile_s"])
            out["recompiles"] = results.get("recompiles")
        stats = summary.get("stats") or {}
        out["peak_mem_bytes"] = stats.get("peak_mem_bytes")
        out["mfu"] = stats.get("mfu")
        if part.seed is not None and part.seed.kind == "time":
            out["seed"] = {"value": part.seed.value, "unit": part.seed.unit, "what": part.seed.what}
            if t is not None:
                out["vs_seed"] = t / part.seed.value  # < 1: faster than the seed's figure
        if part.against:
            base = measured_s(parts.get(part.against) or {})
            if base is not None and t:
                out["speedup_over"] = {"part": part.against, "x": base / t}
            if part.seed is not None and part.seed.kind == "speedup":
                out["seed"] = {"value": part.seed.value, "unit": part.seed.unit, "what": part.seed.what}
        for key, source in (("estimate_before_s", before), ("estimate_after_s", after)):
            p = predicted_s(source.get(part.name))
            out[key] = p
            if p is not None and t:
                out[key.replace("_s", "_error")] = (p - t) / t
        rows.append(out)
    return rows


def _s(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.3f} s"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.0f} %"


def _seed_text(row: dict[str, Any]) -> str:
    seed = row.get("seed")
    if not seed:
        return "—"
    if seed["unit"] == "x":
        return f"×{seed['value']:.2f} ({seed['what']})"
    vs = f"; ours ×{row['vs_seed']:.2f} of it" if row.get("vs_seed") is not None else ""
    return f"{seed['value']} {seed['unit']} ({seed['what']}{vs})"


def _compare_text(row: dict[str, Any]) -> str:
    bits = []
    if row.get("speedup_over"):
        bits.append(f"×{row['speedup_over']['x']:.2f} over {row['speedup_over']['part']}")
    if row.get("compile_s") is not None:
        bits.append(f"compile {row['compile_s']:.1f} s apart")
        if row.get("recompiles"):
            bits.append(f"{row['recompiles']} recompile(s) after warm-up")
    return "; ".join(bits) or "—"


def markdown(record: dict[str, Any]) -> str:
    facts = record.get("facts", {})
    kind = record.get("kind", "device")
    lines = [f"### Device check {record.get('date', '')} — {KINDS.get(kind, kind)}", ""]
    if kind != "device":
        lines += [f"> **{KINDS[kind].split(':')[0]}** — these figures are not a GPU measurement.", ""]
    if record.get("note"):
        lines += [f"> {record['note']}", ""]
    lines.append("| what | value |")
    lines.append("|---|---|")
    for key in ("device", "driver", "gpu_memory", "torch", "cuda", "transformers", "timm", "torchao", "deepspeed",
                "accelctl_commit"):
        if facts.get(key):
            lines.append(f"| {key.replace('_', ' ')} | {facts[key]} |")
    if record.get("target"):
        lines.append(f"| target | {record['target']} |")
    lines.append(f"| wall | {record.get('wall_s', 0):.0f} s of a {record.get('budget_s', 0):.0f} s budget |")
    cal = record.get("calibration") or {}
    refused = cal.get("dropped") if cal.get("status") == "ok" else None
    dropped = f"; {len(refused)} run(s) refused by the fit" if refused else ""
    lines.append(f"| calibration | {cal.get('status', 'not run')}{': ' + cal['why'] if cal.get('why') else ''}"
                 f"{dropped} |")
    lines += ["", "| part | status | measured (median) | seed | compared | estimate before | after calibrate |",
              "|---|---|---|---|---|---|---|"]
    for row in figures(record):
        why = " ".join(str(row.get("why") or "").replace("|", "/").split())
        status = row["status"] + (f" ({why})" if why else "")
        before = f"{_s(row.get('estimate_before_s'))} ({_pct(row.get('estimate_before_error'))})"
        after = f"{_s(row.get('estimate_after_s'))} ({_pct(row.get('estimate_after_error'))})"
        lines.append(f"| {row['part']}: {row['what']} | {status} | {_s(row.get('measured_s'))} | {_seed_text(row)} | "
                     f"{_compare_text(row)} | {before} | {after} |")
    lines += ["", "Estimate columns: predicted step time (or latency) and its error against the measured median; "
              "'after calibrate' is fitted to these same runs (accelctl estimate --calibrate).", ""]
    return "\n".join(lines)


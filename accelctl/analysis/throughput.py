"""The one throughput figure every surface shows -- ``accelctl runs``, ``report``,
``compare``, the TUI, the end-of-run summary and the trackers' summaries.

* **Statistic**: the median of the measured steps' per-step rates (``StepStats.to_dict()``'s
  ``throughput.<rate>.median``; for generation ``generation.tokens_per_s_median``).  Warm-up
  steps never count (``accelctl.analysis.stats``).  A median, not the mean nor the summed
  counts over summed times: one slow step (a checkpoint, a page fault) moves neither it nor
  the median step time it goes with.
* **Unit**: ``unit_for(task, tokens counted)`` -- generation counts tokens/s, training on
  text sequences/s, any other task samples/s.
* **Text**: ``text(value, unit)`` -- ``223.09 samples/s`` (two decimals from 100 on, four
  significant digits below), the same digits on every surface.
"""

from __future__ import annotations

from typing import Any, Mapping

#: what the figure is, said beside it where a surface explains its figures
STATISTIC = "median of the measured steps"


def unit_for(task: str, tokens_counted: bool) -> str:
    if task == "generate":
        return "tokens/s"
    if task in ("pretrain", "finetune") and tokens_counted:
        return "sequences/s"
    return "samples/s"


def _median(section: Any, key: str) -> float | None:
    value = (section or {}).get(key) if isinstance(section, Mapping) else None
    value = value.get("median") if isinstance(value, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def headline(stats: Mapping[str, Any], task: str) -> tuple[float | None, str]:
    """(value, unit) of a run's throughput from its steady-state statistics as stored
    (``summary.json``'s ``stats``, ``StepStats.to_dict()``); (None, unit) without one."""
    rates = stats.get("throughput") or {}
    samples, tokens = _median(rates, "samples_per_s"), _median(rates, "tokens_per_s")
    gen = stats.get("generation") or {}
    gen_tokens = gen.get("tokens_per_s_median") if isinstance(gen, Mapping) else None
    unit = unit_for(task, tokens is not None)
    if task == "generate" or (samples is None and (tokens is not None or gen_tokens is not None)):
        value = gen_tokens if isinstance(gen_tokens, (int, float)) else tokens
        return (None if value is None else float(value)), "tokens/s"
    return samples, unit


def number(value: float) -> str:
    return f"{value:,.2f}" if abs(value) >= 100 else f"{value:.4g}"


def text(value: float | None, unit: str, missing: str = "-") -> str:
    """``223.09 samples/s``; ``missing`` without a figure."""
    return missing if value is None else f"{number(value)} {unit}".rstrip()

"""Price-performance, cost and speed-up: one formula each, for runs and seeds alike.

Units: throughput in units per second (samples, sequences, tokens or images), prices in
USD per hour for the whole allocation (nodes x instance), times in seconds.

* price-performance      = throughput / price per hour        (the seeds' methodology)
* throughput per dollar  = throughput x 3600 / price per hour  (units per USD; the same
  ratio between two targets as price-performance, in a unit one can read)
* cost per million units = price per hour / 3600 / throughput x 1e6
* projected job cost     = train_steps x step time / 3600 x price per hour
* speed-up of B over A   = time per unit of A / time per unit of B
  (= throughput B / throughput A; for latency: latency A / latency B)
* price-performance ratio of B over A = speed-up x price A / price B
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0


def price_performance(throughput: float | None, price_per_hour: float | None) -> float | None:
    """Throughput / price per hour: (units/s) per (USD/h)."""
    if throughput is None or not price_per_hour:
        return None
    return throughput / price_per_hour


def per_dollar(throughput: float | None, price_per_hour: float | None) -> float | None:
    """Units processed for one USD: throughput x 3600 / price per hour."""
    pp = price_performance(throughput, price_per_hour)
    return None if pp is None else pp * SECONDS_PER_HOUR


def cost_per_million(throughput: float | None, price_per_hour: float | None) -> float | None:
    """USD to process one million units."""
    if not throughput or price_per_hour is None:
        return None
    return price_per_hour / SECONDS_PER_HOUR / throughput * 1e6


def projected_hours(train_steps: int | None, step_time_s: float | None) -> float | None:
    """Hours of the whole job: train_steps x step time."""
    if not train_steps or step_time_s is None:
        return None
    return train_steps * step_time_s / SECONDS_PER_HOUR


def projected_cost(train_steps: int | None, step_time_s: float | None, price_per_hour: float | None) -> float | None:
    """USD of the whole job: train_steps x step time / 3600 x price per hour."""
    hours = projected_hours(train_steps, step_time_s)
    return None if hours is None or price_per_hour is None else hours * price_per_hour


def speedup_from_times(time_a: float, time_b: float) -> float:
    """How many times faster B is than A, from their times per unit of work."""
    return time_a / time_b


def speedup_from_rates(rate_a: float, rate_b: float) -> float:
    """How many times faster B is than A, from their throughputs."""
    return rate_b / rate_a


def price_performance_ratio(speedup: float, price_a: float, price_b: float) -> float:
    """Price-performance of B over A (> 1: B does more per dollar)."""
    return speedup * price_a / price_b

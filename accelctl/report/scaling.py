"""Scaling efficiency, as the seeds define it (seed 001).

    per-accelerator throughput  = throughput / accelerators
    scaling efficiency at N     = per-accelerator throughput at N
                                  / per-accelerator throughput at the baseline
    speed-up                    = throughput at N / throughput at the baseline
    ideal speed-up              = accelerators at N / accelerators at the baseline

The baseline is the point with the fewest accelerators (seed 001: one node of 8).
The same function computes a user's sweep and recomputes the seeds' published tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ScalePoint:
    label: str
    #: accelerators in total (nodes x devices per node)
    accelerators: int
    throughput: float
    nodes: int = 1
    #: where the figure comes from (a run id, or "published")
    source: str = ""
    #: the publication's short name for a published figure, else ""
    publication: str = ""


@dataclass(frozen=True)
class ScaleRow:
    point: ScalePoint
    per_accelerator: float
    speedup: float
    ideal_speedup: float
    #: 1.0 = perfect linear scaling
    efficiency: float


def scaling_table(points: Sequence[ScalePoint], baseline: ScalePoint | None = None) -> list[ScaleRow]:
    """Rows in accelerator order; the baseline defaults to the fewest accelerators."""
    if not points:
        return []
    pts = sorted(points, key=lambda p: (p.accelerators, p.nodes))
    base = baseline or pts[0]
    if base.accelerators <= 0 or base.throughput <= 0:
        raise ValueError(f"baseline {base.label!r} needs accelerators > 0 and throughput > 0")
    base_per = base.throughput / base.accelerators
    rows = []
    for p in pts:
        per = p.throughput / p.accelerators
        rows.append(ScaleRow(point=p, per_accelerator=per, speedup=p.throughput / base.throughput,
                             ideal_speedup=p.accelerators / base.accelerators, efficiency=per / base_per))
    return rows

"""The "estimated" column of ``accelctl report --reference``: for every seed row that has a
workload in ``workloads/``, what ``accelctl estimate`` predicts beside what the seed published,
and the error ``(estimated - published) / published``.

Leave-one-out is kept by construction: every factor the estimate uses comes from datasheets
and papers (``accelctl.estimate.factors``), none is fitted to a seed's figure, so no row's
estimate has seen its own number.  A row is estimated at its own batch (the seed's global
batch over its devices), on the target its workload file declares for it.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

#: the workload files of the repository (absent from an installed wheel: no estimated column)
WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"

_BERT = "bert_large_pretrain.wl"
_B15 = "bert_1_5b_zero1.wl"
#: seed table -> row -> (workload file, workload, target)
ROWS: dict[str, dict[str, tuple[str, str, str]]] = {
    "000-bert": {"gaudi1_bs32": (_BERT, "bert_large_phase1_bs32", "gaudi1"),
                 "gaudi2_bs32": (_BERT, "bert_large_phase1_bs32", "gaudi2"),
                 "gaudi2_bs64": (_BERT, "bert_large_phase1_bs64", "gaudi2")},
    "000-sd": {d: ("stable_diffusion.wl", "stable_diffusion", d) for d in ("gaudi1", "a100", "gaudi2")},
    "001-bert-large": {f"{n}n": ("bert_large_scaling.wl", "bert_large_scaling", f"dl1_{n}n") for n in (1, 2, 4, 8)},
    "001-bert-1.5b": {"1n": (_B15, "bert_1_5b_zero1_8n", "dl1_1n"), "8n": (_B15, "bert_1_5b_zero1_8n", "dl1_8n"),
                      "16n": (_B15, "bert_1_5b_zero1_16n", "dl1_16n")},
    "002-vit": {"p4d": ("vit_fp8.wl", "vit_huge_fp8", "p4d"), "p5": ("vit_fp8.wl", "vit_huge_fp8", "p5_bf16"),
                "p4d_te": ("vit_fp8.wl", "vit_huge_fp8", "p4d_te"), "p5_te": ("vit_fp8.wl", "vit_huge_fp8", "p5_te"),
                "p5_fp8": ("vit_fp8.wl", "vit_huge_fp8", "p5_fp8")},
    "003-bloomz": {"176b_gaudi2": ("bloomz.wl", "bloomz_176b", "gaudi2"),
                   "176b_gaudi2_19": ("bloomz.wl", "bloomz_176b", "gaudi2"),
                   "176b_a100": ("bloomz.wl", "bloomz_176b", "a100"),
                   "7b8_gaudi2": ("bloomz.wl", "bloomz_7b", "gaudi2_8x"),
                   "7b8_a100": ("bloomz.wl", "bloomz_7b", "a100_8x"),
                   "7b8_gaudi1": ("bloomz.wl", "bloomz_7b", "gaudi1_8x"),
                   "7b1_gaudi2": ("bloomz.wl", "bloomz_7b", "gaudi2_1x"),
                   "7b1_a100": ("bloomz.wl", "bloomz_7b", "a100_1x"),
                   "7b1_gaudi1": ("bloomz.wl", "bloomz_7b", "gaudi1_1x")},
}


@functools.lru_cache(maxsize=None)
def _specs(file: str) -> dict[str, Any]:
    from accelctl.api import load

    return {s.name: s for s in load(WORKLOADS / file)}


@dataclasses.dataclass(frozen=True)
class Estimated:
    value: float | None
    error: float | None
    bound_by: str
    note: str = ""


def estimate_row(table_id: str, row_id: str, row: dict[str, Any], metric: str, published: float | None) -> Estimated:
    """The estimate of one seed row: ``metric`` is step_time_s, latency_s or throughput."""
    from accelctl.estimate.roofline import estimate

    where = ROWS.get(table_id, {}).get(row_id)
    if where is None or not (WORKLOADS / where[0]).is_file():
        return Estimated(None, None, "", "no workload for this row")
    file, workload, target_name = where
    spec = _specs(file)[workload]
    target = spec.target(target_name)
    batch, devices = row.get("batch"), row.get("devices") or target.world_size
    if spec.task.training and batch and devices and batch % devices == 0:
        micro = batch // devices // target.batch.accumulation
        target = dataclasses.replace(target, batch=dataclasses.replace(target.batch, micro=max(1, micro),
                                                                       global_size=None))
    e = estimate(spec, target)
    if e.status != "ok":
        return Estimated(None, None, "", e.status)
    value = getattr(e, metric)
    error = None if value is None or not published else (value - published) / published
    return Estimated(value, error, e.bound_by)

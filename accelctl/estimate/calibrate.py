"""``accelctl estimate --calibrate RUN...``: the achievable fractions fitted to the user's own
recorded runs, in place of the catalog's (``factors.py``).

For each run: its workload file (the copy in the run folder) is estimated for the run's
target with the default factors; the measured median step time divides the predicted one.
A compute-bound prediction scales the MFU by that ratio, a memory-bound one the bandwidth
efficiency (geometric mean over the runs of each kind).  A run whose target has no
datasheet (the host CPU) or that recorded no step time cannot calibrate anything: E581;
an id the run store does not hold: E582.
"""

from __future__ import annotations

import math

from accelctl import exitcodes
from accelctl.errors import Diagnostic, PlanError
from accelctl.estimate.factors import DEFAULT, Factor, Factors
from accelctl.estimate.roofline import estimate


def _refuse(run_id: str, why: str, code: str = "E581", exit_code: int = exitcodes.FAILED) -> PlanError:
    return PlanError(diagnostics=[Diagnostic(code, f"run {run_id} cannot calibrate the estimate: {why}",
                                             None, run_id, "calibrate from runs on an accelerator the catalog "
                                             "has a datasheet for")], exit_code=exit_code)


def ratios_from_runs(run_ids, runs_root=None) -> list[tuple[str, str, float]]:
    """(run id, bound_by, measured / predicted step time) per run."""
    from accelctl.dsl.parser import parse_file
    from accelctl.run.store import WORKLOAD_FILE, RunStoreError, load_run
    from accelctl.spec.check import check

    out = []
    for rid in run_ids:
        try:
            rec = load_run(rid, runs_root)
        except RunStoreError as exc:
            raise _refuse(str(rid), str(exc), "E582", exitcodes.USAGE) from None  # an unknown run id
        if rec.median_step_time_s is None:
            raise _refuse(rec.id, f"it recorded no step time (status {rec.status})")
        wl = rec.path / WORKLOAD_FILE
        if not wl.is_file():
            raise _refuse(rec.id, f"its folder holds no {WORKLOAD_FILE}")
        specs = {s.name: s for s in check(parse_file(wl))}
        spec = specs.get(rec.workload)
        if spec is None or rec.target not in {t.name for t in spec.targets}:
            raise _refuse(rec.id, f"workload {rec.workload!r} / target {rec.target!r} is not in its {WORKLOAD_FILE}")
        est = estimate(spec, spec.target(rec.target))
        if est.status != "ok" or not est.step_time_s:
            raise _refuse(rec.id, est.status)
        out.append((rec.id, est.bound_by, rec.median_step_time_s / est.step_time_s))
    return out


def fit(ratios: list[tuple[str, str, float]], base: Factors = DEFAULT) -> Factors:
    """Scale MFU by the compute-bound runs' ratio, bandwidth by the memory-bound runs'."""
    def gmean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    compute = [r for _, b, r in ratios if b == "compute"]
    memory = [r for _, b, r in ratios if b == "memory bandwidth"]
    ids = ", ".join(i for i, _, _ in ratios)
    out = base
    if compute:
        out = out.with_(mfu=Factor(min(1.0, base.mfu.value / gmean(compute)),
                                   f"fitted to {len(compute)} compute-bound run(s): {ids}"))
    if memory:
        out = out.with_(bandwidth=Factor(min(1.0, base.bandwidth.value / gmean(memory)),
                                         f"fitted to {len(memory)} memory-bound run(s): {ids}"))
    return out


def fit_from_runs(run_ids, runs_root=None) -> Factors:
    return fit(ratios_from_runs(run_ids, runs_root))

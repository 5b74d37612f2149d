"""``accelctl estimate --calibrate RUN...``: the achievable fractions fitted to the user's own
recorded runs, per device kind and precision, stored beside the runs and used by every later
``accelctl estimate`` of that device and precision (with the runs named as the provenance).

For each run: its workload file (the copy in the run folder) is estimated for the run's
target with the catalog's factors; that gives the step's compute time at the full peak
``c``, its memory time at the full bandwidth ``m``, its transformer layer passes ``n``
(layers x forward/backward x micro-steps) and what bounds it.  The measured median step time
``t`` (the run's ``summary.json``), less what neither fraction scales (exposed communication;
for a compute-bound run also the element-wise kernels and the optimizer step), is explained as

    t = x * c + o * n     (compute-bound runs; ``m`` for memory-bound ones)

``1 / x`` is the fraction of the peak the workloads reach (MFU, or bandwidth efficiency) and
``o`` the host's time per layer pass.  ``o`` is fitted (least squares) only where it adds to
the step -- the host CPU, which computes and dispatches in turn -- and only from two or more
runs whose ``c / n`` differ (two batch sizes, two models); otherwise the catalog's ``o`` is
kept and ``x`` is the geometric mean of ``(t - o n) / c``.  Runs of different devices or
precisions are fitted separately.

A run that recorded no step time, or whose target has no datasheet: E581; an id the run
store does not hold: E582.  Nothing here touches ``accelctl report --reference``: the
seeds' rows are estimated with the catalog's factors only (leave-one-out).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from accelctl import exitcodes
from accelctl.errors import Diagnostic, PlanError
from accelctl.estimate.factors import DEFAULT, Factor, Factors
from accelctl.estimate.roofline import PEAK_DTYPE, estimate, synchronous

#: beside the run folders (the store ignores files that are not run folders)
STORE_FILE = "estimate-calibration.json"
SCHEMA = 1


def _refuse(run_id: str, why: str, code: str = "E581", exit_code: int = exitcodes.FAILED) -> PlanError:
    return PlanError(diagnostics=[Diagnostic(code, f"run {run_id} cannot calibrate the estimate: {why}",
                                             None, run_id, "calibrate from finished runs (accelctl runs lists "
                                             "them) of a device the estimate has a datasheet for")], exit_code=exit_code)


@dataclass(frozen=True)
class Sample:
    """One run, as the fit sees it."""

    run_id: str
    device: str
    dtype: str
    bound_by: str
    measured_s: float
    #: compute time at the full peak, memory time at the full bandwidth (seconds)
    compute_full_s: float
    memory_full_s: float
    layer_passes: int
    #: what neither fraction scales: exposed communication, and (for a compute-bound run) the
    #: element-wise kernels and the optimizer step at the catalog's bandwidth efficiency
    other_s: float
    synchronous: bool


def samples_from_runs(run_ids, runs_root=None, base: Factors = DEFAULT) -> list[Sample]:
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
        target = spec.target(rec.target)
        if rec.summary.get("what_ran", {}).get("rehearsal"):
            raise _refuse(rec.id, "it is a rehearsal on this CPU of another device's target")
        est = estimate(spec, target, base)
        if est.status != "ok" or not est.step_time_s:
            raise _refuse(rec.id, est.status)
        if est.task == "generate":
            raise _refuse(rec.id, "generation runs do not calibrate yet (training and inference steps do)")
        dtype = PEAK_DTYPE.get(target.precision.dtype, "bf16")
        out.append(Sample(rec.id, target.device, dtype, est.bound_by, float(rec.median_step_time_s),
                          est.compute_s * base.mfu.value, est.memory_s * base.bandwidth.value,
                          est.layer_passes, _other(est), synchronous(target)))
    return out


def _other(est) -> float:
    if est.bound_by in ("compute", "host overhead"):
        return est.exposed_communication_s + est.elementwise_s + est.optimizer_s
    return est.exposed_communication_s


def _gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _fit_line(rows: list[tuple[float, float, float]]) -> tuple[float, float] | None:
    """Least squares ``t = x c + o n`` over (t, c, n); None unless both come out positive and the
    rows are not proportional."""
    scc = sum(c * c for _, c, _ in rows)
    snn = sum(n * n for _, _, n in rows)
    scn = sum(c * n for _, c, n in rows)
    stc = sum(t * c for t, c, _ in rows)
    stn = sum(t * n for t, _, n in rows)
    det = scc * snn - scn * scn
    if len(rows) < 2 or det <= 1e-9 * scc * snn:
        return None
    x, o = (stc * snn - stn * scn) / det, (scc * stn - scn * stc) / det
    return (x, o) if x > 0 and o > 0 else None


def fit(samples: list[Sample], base: Factors = DEFAULT) -> Factors:
    """Factors for one device and precision (every sample of the same pair)."""
    ids = ", ".join(s.run_id for s in samples)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    out = base
    o = base.train_layer_overhead_s.value
    for kind, attr, full in (("compute", "mfu", "compute_full_s"), ("memory bandwidth", "bandwidth", "memory_full_s")):
        group = [s for s in samples if (s.bound_by == kind or (s.bound_by == "host overhead" and kind == "compute"))]
        if not group:
            continue
        rows = [(max(s.measured_s - s.other_s, 1e-9), getattr(s, full), s.layer_passes) for s in group]
        line = _fit_line(rows) if all(s.synchronous for s in group) else None
        what = f"fitted {day} to {len(group)} {kind}-bound run(s) on {group[0].device} {group[0].dtype}: {ids}"
        if line is not None:
            x, o = line
            out = out.with_(train_layer_overhead_s=Factor(o, f"{what} (least squares with the fraction)"))
        else:
            off = o if all(s.synchronous for s in group) else 0.0
            x = _gmean([max(t - off * n, 1e-9) / c for t, c, n in rows])
        out = out.with_(**{attr: Factor(min(1.0, 1 / x), what)})
    return out


def fit_by_device(samples: list[Sample], base: Factors = DEFAULT) -> dict[str, Factors]:
    """``key(device, dtype)`` -> its fitted factors."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(key(s.device, s.dtype), []).append(s)
    return {k: fit(g, base) for k, g in groups.items()}


def fit_from_runs(run_ids, runs_root=None) -> Factors:
    """The factors of the runs' one device and precision (the first pair when they mix)."""
    return next(iter(fit_by_device(samples_from_runs(run_ids, runs_root)).values()))


# ------------------------------------------------------------------ the stored calibration

def key(device: str, dtype: str) -> str:
    return f"{device}|{dtype}"


def target_key(target) -> str:
    return key(target.device, PEAK_DTYPE.get(target.precision.dtype, "bf16"))


def store_path(runs_root=None) -> Path:
    from accelctl.run.store import runs_root as root

    return root(runs_root) / STORE_FILE


_FIELDS = ("mfu", "bandwidth", "train_layer_overhead_s")


def save(fitted: dict[str, Factors], runs_root=None) -> Path:
    """Merge ``fitted`` into the stored calibration (a pair fitted again replaces its entry)."""
    path = store_path(runs_root)
    entries = {k: v for k, v in _read(path).items()}
    for k, fx in fitted.items():
        entries[k] = {f: {"value": getattr(fx, f).value, "source": getattr(fx, f).source} for f in _FIELDS
                      if getattr(fx, f) != getattr(DEFAULT, f)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"schema": SCHEMA, "entries": entries}, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path


def _read(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def load(runs_root=None) -> dict[str, Factors]:
    """The stored calibration: ``key(device, dtype)`` -> factors (the catalog's where not fitted).
    A missing or unreadable file is no calibration."""
    out = {}
    for k, entry in _read(store_path(runs_root)).items():
        try:
            out[k] = DEFAULT.with_(**{f: Factor(float(v["value"]), str(v["source"]))
                                      for f, v in entry.items() if f in _FIELDS})
        except (TypeError, KeyError, ValueError):
            continue
    return out

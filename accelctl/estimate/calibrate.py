"""``accelctl estimate --calibrate RUN...``: the estimate's own factors fitted to the user's
recorded runs, per device kind and precision, stored beside the runs (``STORE_FILE``) and used
by every later ``accelctl estimate`` of that device and precision, the runs named as provenance.

Each run is estimated through ``roofline.estimate`` itself with candidate factors, so every
factor's effect on every run counts; the fit minimises the RMS of ``log(estimated / measured)``
and chooses which factors move by forward selection (``GOOD_ENOUGH``, ``MIN_GAIN``), preferring
the one that moved least.  A factor no run depends on keeps the catalog's value.  E581: a run
that cannot be estimated; E582: no such run.  ``report --reference`` never reads the fit.
Why this replaced a closed form: docs/estimate.md (``--calibrate``).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from accelctl import exitcodes
from accelctl.errors import Diagnostic, PlanError
from accelctl.estimate.factors import DEFAULT, Factor, Factors
from accelctl.estimate.roofline import PEAK_DTYPE, estimate

#: beside the run folders (the store ignores files that are not run folders)
STORE_FILE = "estimate-calibration.json"
#: a larger file is no fit this code wrote (an entry is ~300 bytes a device and precision)
MAX_BYTES = 1 << 20
SCHEMA = 1

#: the factors a calibration may fit, with the range each is searched in
FITTABLE: dict[str, tuple[float, float]] = {
    "mfu": (1e-3, 1.0),
    "bandwidth": (1e-3, 1.0),
    "train_layer_overhead_s": (1e-7, 1.0),
    "eager_layer_overhead_s": (1e-7, 1.0),
    "fused_layer_overhead_s": (1e-7, 1.0),
    "graph_layer_overhead_s": (1e-7, 1.0),
}
#: the fit stops once the runs' RMS log error is within this (2 %)
GOOD_ENOUGH = math.log(1.02)
#: a factor is added only if it lowers the RMS log error to at most this share of what it was
MIN_GAIN = 0.9
_SCAN_POINTS = 49


def _refuse(run_id: str, why: str, code: str = "E581", exit_code: int = exitcodes.FAILED) -> PlanError:
    return PlanError(diagnostics=[Diagnostic(code, f"run {run_id} cannot calibrate the estimate: {why}",
                                             None, run_id, "calibrate from finished runs (accelctl runs lists "
                                             "them) of a device the estimate has a datasheet for")], exit_code=exit_code)


@dataclass(frozen=True)
class Sample:
    """One run, as the fit sees it: what it measured and the estimate of it for given factors."""

    run_id: str
    device: str
    dtype: str
    measured_s: float
    #: the estimate's step time (generation: latency) of the run's workload and target with these factors
    predict: Callable[[Factors], float]


def samples_from_runs(run_ids, runs_root=None) -> list[Sample]:
    from accelctl.dsl.parser import parse_file
    from accelctl.run.store import WORKLOAD_FILE, RunStoreError, load_run
    from accelctl.language.check import check

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
        est = estimate(spec, target)
        if est.status != "ok" or not est.step_time_s:
            raise _refuse(rec.id, est.status)
        dtype = PEAK_DTYPE.get(target.precision.dtype, "bf16")
        out.append(Sample(rec.id, target.device, dtype, float(rec.median_step_time_s), _predictor(spec, target)))
    return out


def _predictor(spec, target) -> Callable[[Factors], float]:
    def predict(fx: Factors) -> float:
        est = estimate(spec, target, fx)
        return est.latency_s if est.task == "generate" and est.latency_s else est.step_time_s

    return predict


def rms_log_error(samples: Sequence[Sample], fx: Factors) -> float:
    """sqrt(mean(log(estimated / measured)^2)) over the runs with these factors."""
    return math.sqrt(sum(math.log(max(s.predict(fx), 1e-12) / s.measured_s) ** 2 for s in samples) / len(samples))


def _with(fx: Factors, names: Sequence[str], logs: Sequence[float]) -> Factors:
    values = {}
    for name, v in zip(names, logs):
        lo, hi = FITTABLE[name]
        values[name] = Factor(min(hi, max(lo, math.exp(v))), getattr(fx, name).source)
    return fx.with_(**values)


def _optimise(samples: Sequence[Sample], fx: Factors, fitted: list[str], new: str) -> tuple[float, Factors]:
    """``new`` scanned over its range (the others as they are), then all of ``fitted + [new]``
    refined together: (RMS log error, factors)."""
    from scipy.optimize import minimize

    lo, hi = (math.log(b) for b in FITTABLE[new])
    scan = [lo + (hi - lo) * i / (_SCAN_POINTS - 1) for i in range(_SCAN_POINTS)]
    scan.append(math.log(getattr(fx, new).value))
    start = min(scan, key=lambda v: rms_log_error(samples, _with(fx, [new], [v])))
    names = [*fitted, new]
    x0 = [math.log(getattr(fx, n).value) for n in fitted] + [start]
    done = minimize(lambda x: rms_log_error(samples, _with(fx, names, x)), x0, method="Nelder-Mead",
                    options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 400 * len(names)})
    best = _with(fx, names, done.x)
    return rms_log_error(samples, best), best


def _moved(before: Factors, after: Factors, name: str) -> float:
    return abs(math.log(getattr(after, name).value / getattr(before, name).value))


def fit(samples: list[Sample], base: Factors = DEFAULT) -> Factors:
    """Factors for one device and precision (every sample of the same pair): see the module doc."""
    fx, err = base, rms_log_error(samples, base)
    before, fitted = err, []
    while err > GOOD_ENOUGH and len(fitted) < min(len(samples), len(FITTABLE)):
        trials = [(*_optimise(samples, fx, fitted, name), name) for name in FITTABLE if name not in fitted]
        # errors within GOOD_ENOUGH tie; of those, the factor that moved least from where it was
        best_err, best_fx, name = min(trials, key=lambda t: (max(t[0], GOOD_ENOUGH), _moved(fx, t[1], t[2])))
        if best_err > MIN_GAIN * err:
            break
        fx, err = best_fx, best_err
        fitted.append(name)
    if not fitted:
        return base
    day = time.strftime("%Y-%m-%d", time.gmtime())
    ids = ", ".join(s.run_id for s in samples)
    what = (f"fitted {day} to {len(samples)} run(s) on {samples[0].device} {samples[0].dtype} (with "
            f"{', '.join(fitted)}; RMS error {math.expm1(before):.0%} -> {math.expm1(err):.0%}): {ids}")
    return fx.with_(**{n: Factor(getattr(fx, n).value, what) for n in fitted})


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


_FIELDS = tuple(FITTABLE)


def save(fitted: dict[str, Factors], runs_root=None) -> Path:
    """Merge ``fitted`` into the stored calibration (a pair fitted again replaces its entry)."""
    from accelctl import private_files

    path = store_path(runs_root)
    if problem := private_files.file_problem(path):  # a device, FIFO or link there is never replaced
        raise OSError(f"cannot store the estimate's calibration: {problem}")
    entries = {k: v for k, v in _read(path).items()}
    for k, fx in fitted.items():
        entries[k] = {f: {"value": getattr(fx, f).value, "source": getattr(fx, f).source} for f in _FIELDS
                      if getattr(fx, f) != getattr(DEFAULT, f)}
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here: ``estimate`` reads the fit and never writes one

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".estimate-calibration-")  # a new file, never a link
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"schema": SCHEMA, "entries": entries}, indent=2, sort_keys=True))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


#: the stored fit, as its warning names it
WHAT = "the estimate's stored calibration"


def _read(path: Path) -> dict[str, dict]:
    """The stored fit's entries: a regular file of this user's only (``private_files``: one
    warning otherwise), in a folder only they can write, bounded, never a FIFO waited on or a
    link followed, every value one the fit could have stored; {} for anything else."""
    from accelctl import private_files

    if not path.parent.is_dir() or not os.path.lexists(path):
        return {}
    problem = private_files.folder_problem(path.parent)
    if problem:
        private_files.distrust(WHAT, path.parent, problem)
        return {}
    try:
        raw = private_files.read_file(path, MAX_BYTES)
        data = json.loads(raw.decode("utf-8")) if raw else None
    except private_files.Untrusted as exc:
        private_files.distrust(WHAT, path, exc.strerror or str(exc))
        return {}
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
        return {}
    entries = data["entries"]
    if not all(isinstance(k, str) and _stored_entry(v) for k, v in entries.items()):
        return {}  # not a file this code wrote
    return entries


def _stored_entry(entry: object) -> bool:
    """``entry`` holds only fittable factors, each a finite number in the range the fit searches
    and a text source."""
    if not isinstance(entry, dict):
        return False
    for name, v in entry.items():
        if name not in FITTABLE or not isinstance(v, dict) or set(v) != {"value", "source"}:
            return False
        x, (lo, hi) = v["value"], FITTABLE[name]
        if type(x) not in (int, float) or not lo <= x <= hi or not isinstance(v["source"], str):
            return False  # NaN fails the range too
    return True


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

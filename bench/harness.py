"""The A/B machinery of ``python -m bench``: interleaved or core-pinned pairs, ratios, intervals.

A comparison has two *arms*, ``a`` (accelctl) and ``b`` (the baseline).  Each arm is a
callable ``arm(core) -> dict[str, float]`` that runs one fresh process tree and returns
the metrics it measured (seconds: ``step_s``, ``wall_s`` ...).  ``run_pairs`` runs ``n``
pairs of them:

* **interleaved** (the default): one arm after the other, the order alternating each pair
  (a b, b a, a b ...), so a drift of the machine's speed does not favour one side;
* **pinned** (``--pin``, on a machine with 2+ cores, for single-process comparisons): both
  arms at once, each on its own core (``os.sched_setaffinity`` of the child as it starts),
  the cores swapped each pair, so both see the same machine at the same moment.

For each metric the pair's ratio is ``a / b`` (below 1: accelctl took less time).
``summarize`` reports the median ratio, its spread (min-max), n, and a bootstrap 95 %
interval of the median (``scipy.stats.bootstrap``, percentile method, fixed seed).
``verdict`` says "faster" / "slower" only when that interval lies wholly below / above 1,
"no difference shown" when it holds 1, and nothing when there are too few pairs for an
interval (n < 3).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
MIN_PAIRS_FOR_INTERVAL = 3

Arm = Callable[[int | None], dict[str, float]]


@dataclass
class Setup:
    """What a comparison hands the harness for one session: its two arms, and what to say."""

    a: Arm
    b: Arm
    a_label: str
    b_label: str
    #: metric name -> what it measures; the first is the headline
    metrics: dict[str, str]
    #: may both arms run at once on one core each (single-process arms only)
    pinnable: bool = True
    cleanup: Callable[[], None] = lambda: None


@dataclass
class Comparison:
    """One entry of the suite: a name for ``--only``, a title, and how to set it up."""

    name: str
    title: str
    #: (quick, workdir) -> Setup
    setup: Callable[[bool, Path], Setup]
    pairs: int = 8
    quick_pairs: int = 3
    #: None when it can run here, else why not ("accelerate not installed")
    unavailable: Callable[[], str | None] = lambda: None


@dataclass
class PairLog:
    a: list[dict[str, float]] = field(default_factory=list)
    b: list[dict[str, float]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    cores: list[tuple[int | None, int | None]] = field(default_factory=list)


def usable_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return []


def pin(pid: int, core: int | None) -> None:
    """Pin a just-started child to one core; what it starts later inherits it.  Done from the
    parent right after the start (a ``preexec_fn`` is not safe with the pinned mode's threads);
    the child is still starting its interpreter then, long before it starts anything."""
    if core is not None:
        os.sched_setaffinity(pid, {core})


def run_pairs(setup: Setup, n: int, pin: bool, progress: Callable[[str], None] = lambda s: None) -> PairLog:
    cores = usable_cores()
    pinned = pin and setup.pinnable and len(cores) >= 2
    log = PairLog()
    for i in range(n):
        if pinned:
            ca, cb = (cores[0], cores[1]) if i % 2 == 0 else (cores[1], cores[0])
            out: dict[str, dict[str, float] | BaseException] = {}

            def go(key, arm, core):
                try:
                    out[key] = arm(core)
                except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                    out[key] = exc

            threads = [threading.Thread(target=go, args=("a", setup.a, ca)),
                       threading.Thread(target=go, args=("b", setup.b, cb))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for key in ("a", "b"):
                if isinstance(out[key], BaseException):
                    raise out[key]  # type: ignore[misc]
            log.a.append(out["a"])  # type: ignore[arg-type]
            log.b.append(out["b"])  # type: ignore[arg-type]
            log.order.append("a|b")
            log.cores.append((ca, cb))
        else:
            order = ("a", "b") if i % 2 == 0 else ("b", "a")
            got = {}
            for key in order:
                got[key] = (setup.a if key == "a" else setup.b)(None)
            log.a.append(got["a"])
            log.b.append(got["b"])
            log.order.append(" ".join(order))
            log.cores.append((None, None))
        progress(f"pair {i + 1}/{n} ({log.order[-1]}): " + ", ".join(
            f"{m} {log.a[-1][m]:.4g}/{log.b[-1][m]:.4g}" for m in setup.metrics if m in log.a[-1] and m in log.b[-1]))
    return log


def bootstrap_interval(ratios: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the median ratio; None below ``MIN_PAIRS_FOR_INTERVAL``."""
    if len(ratios) < MIN_PAIRS_FOR_INTERVAL:
        return None
    if max(ratios) == min(ratios):
        return (ratios[0], ratios[0])
    import numpy as np
    from scipy import stats

    res = stats.bootstrap((np.asarray(ratios),), np.median, confidence_level=confidence, n_resamples=4000,
                          method="percentile", rng=np.random.default_rng(0))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (lo, hi)


def verdict(interval: tuple[float, float] | None) -> str | None:
    """What the interval of a time ratio (accelctl / baseline) supports, or None without one."""
    if interval is None:
        return None
    lo, hi = interval
    if hi < 1.0:
        return "faster"
    if lo > 1.0:
        return "slower"
    return "no difference shown"


def summarize(log: PairLog, metric: str) -> dict | None:
    pairs = [(a[metric], b[metric]) for a, b in zip(log.a, log.b)
             if a.get(metric) is not None and b.get(metric) is not None and b[metric] > 0]
    if not pairs:
        return None
    ratios = [a / b for a, b in pairs]
    ci = bootstrap_interval(ratios)
    return {
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "n": len(ratios),
        "ci95": list(ci) if ci else None,
        "verdict": verdict(ci),
        "a_median": statistics.median(a for a, _ in pairs),
        "b_median": statistics.median(b for _, b in pairs),
        "ratios": ratios,
    }


def same_model(log: PairLog, tolerance: float = 1e-5) -> dict[str, bool] | None:
    """Whether both arms of every pair reported the same parameter count and first loss (warm-up
    step 1, before any update), for what both report: they trained one model on the same
    batches.  None when no pair's arms both report either."""
    out = {}
    for key, equal in (("params", lambda a, b: a == b), ("first_loss", lambda a, b: abs(a - b) <= tolerance)):
        pairs = [(a[key], b[key]) for a, b in zip(log.a, log.b) if key in a and key in b]
        if pairs:
            out[key] = all(equal(a, b) for a, b in pairs)
    return out or None


def median_parts(runs: list[dict[str, float]], prefix: str) -> dict[str, float]:
    """Median over runs of every metric whose name starts with ``prefix`` (the start-up split)."""
    keys = sorted({k for r in runs for k in r if k.startswith(prefix)})
    return {k[len(prefix):]: statistics.median(r[k] for r in runs if k in r) for k in keys}


# ------------------------------------------------------------------ running processes

def base_env(threads: int = 1) -> dict[str, str]:
    """The environment both arms run in: this checkout first on the path, ``threads`` OpenMP threads."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_timed(cmd: list[str], core: int | None, timeout: float, env: dict[str, str] | None = None,
              cwd: Path = ROOT) -> tuple[float, float, str]:
    """Run ``cmd`` to the end; (start time.time(), wall seconds, stdout).  Non-zero exit raises
    with the tail of its output."""
    started = time.time()
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, cwd=cwd, env=env or base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        pin(proc.pid, core)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # its whole session: the CLI and the workers it started
            proc.communicate()
            raise
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "\n".join((out + err).strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{tail}")
    return started, wall, out


def python() -> str:
    return sys.executable

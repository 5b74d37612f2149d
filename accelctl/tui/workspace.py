"""The data behind the Workloads, Plan and Compare screens (plain python, no Textual).

* ``scan(path)``: the ``.wl`` files of a folder, each parsed and checked, with its
  validation state and every diagnostic;
* ``make_plan(spec, target)``: a plan, or the error that says why the target cannot be
  planned (unsupported is a value, shown in the plan pane, never a crash);
* ``Comparison``: two stored runs side by side — ``accelctl compare``'s comparison
  (speed-up and price-performance with 95 % CIs over independent runs, a verdict or a
  refusal) of the runs' report entries; a run of a series stands for its series.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class WorkloadFile:
    path: Path
    text: str
    specs: tuple = ()
    diags: list = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(d.severity == "error" for d in self.diags)

    @property
    def warnings(self) -> int:
        return sum(d.severity != "error" for d in self.diags)

    @property
    def state(self) -> str:
        return "errors" if self.errors else "warnings" if self.warnings else "ok"

    def spec(self, name: str | None):
        return next((s for s in self.specs if s.name == name), None)

    def choices(self) -> list[tuple[str, str]]:
        """Every (workload, target) pair of the file's valid workloads."""
        return [(s.name, t.name) for s in self.specs for t in s.targets] if not self.errors else []


def load_file(path: str | Path) -> WorkloadFile:
    from accelctl.api import read_source, validate_text
    from accelctl.errors import WorkloadError

    path = Path(path)
    try:
        text = read_source(path)
    except WorkloadError as exc:
        return WorkloadFile(path, "", (), list(exc.diagnostics))
    specs, diags = validate_text(text, path, cached=True)  # the file as read: its parse may come from the cache
    return WorkloadFile(path, text, specs if not any(d.severity == "error" for d in diags) else (), diags)


def scan(path: str | Path) -> list[WorkloadFile]:
    """The workload files of a folder (sorted), or the one file named."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(p.glob("*.wl")) if p.is_dir() else []
    return [load_file(f) for f in files]


@dataclass(frozen=True)
class PlanResult:
    plan: Any = None
    #: the rendered text of the plan (``accelctl plan``'s text form)
    text: str = ""
    #: why it could not be planned (the error's rendered diagnostics)
    error: str = ""


def make_plan(spec, target: str) -> PlanResult:
    from accelctl.api import plan as api_plan
    from accelctl.api import render_plan_text
    from accelctl.errors import AccelctlError

    try:
        p = api_plan(spec, target)
    except AccelctlError as exc:
        return PlanResult(error=exc.render())
    except KeyError:
        return PlanResult(error=f"workload {spec.name} has no target '{target}'")
    return PlanResult(plan=p, text=render_plan_text(p))


def plan_diff(a: PlanResult, b: PlanResult, a_name: str, b_name: str) -> str:
    """A unified diff of two plans' text (an error counts as the plan's text)."""
    from accelctl.api import diff_texts

    return diff_texts(a.text or a.error, b.text or b.error, f"plan {a_name}", f"plan {b_name}",
                      f"# plans {a_name} and {b_name} are identical")


# --------------------------------------------------------------------------- comparing runs


@dataclass(frozen=True)
class RunSide:
    """One run of a comparison: its record and its ``Entry`` (``accelctl.report.entry``:
    steady state from its events, the target's price from its ``spec.json``), the same
    figures ``accelctl report`` and ``accelctl compare`` show."""

    record: Any
    entry: Any

    @property
    def price_per_hour(self) -> float | None:
        return self.entry.price_per_hour

    @property
    def throughput(self) -> tuple[float | None, str]:
        """(value, unit) of the steady-state throughput: ``(228.8, "sequences/s")``."""
        return self.entry.throughput, self.entry.unit

    @property
    def cost_per_million(self) -> float | None:
        """USD per million units (samples, sequences, tokens) at the steady-state throughput."""
        return self.entry.cost_per_million

    @property
    def median_s(self) -> float | None:
        return self.entry.step_time_median_s


def run_side(record) -> RunSide:
    """The side of ``record``: its whole series when it is one of ``measure { repeat = N }``."""
    from accelctl.report.entry import entry_from_series
    from accelctl.run.store import series_runs

    return RunSide(record, entry_from_series(series_runs(record)))


@dataclass(frozen=True)
class Comparison:
    """B against A (the baseline): ``accelctl compare``'s comparison
    (``accelctl.analysis.compare``: speed-up and price-performance with 95 % CIs, a
    verdict) of the two runs' entries, and what to keep in mind reading it."""

    a: RunSide
    b: RunSide
    #: compare runs ``accelctl compare`` refuses (E226/E227) anyway, as its ``--force``
    force: bool = False

    @functools.cached_property
    def result(self):
        from accelctl.analysis.compare import compare as compare_entries

        return compare_entries(self.a.entry, self.b.entry, force=self.force)

    @property
    def speedup(self) -> float | None:
        """How many times faster B is than A (by throughput, else latency, else step time)."""
        return self.result.speedup

    @property
    def speedup_ci(self):
        return self.result.speedup_ci

    @property
    def verdict(self) -> str:
        return self.result.verdict

    @property
    def price_performance(self) -> float | None:
        """How many times more work per dollar B does than A (speed-up x price A / price B)."""
        return self.result.price_performance

    @property
    def price_performance_ci(self):
        return self.result.price_performance_ci

    @property
    def caveats(self) -> list[str]:
        """What to keep in mind beyond the refusals (``result.refusals``)."""
        out = []
        for side, name in ((self.a, "A"), (self.b, "B")):
            if side.price_per_hour is None:
                out.append(f"no price known for run {name}'s target {side.record.target}")
        return out


def compare(record_a, record_b) -> Comparison:
    return Comparison(run_side(record_a), run_side(record_b))

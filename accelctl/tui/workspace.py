"""The data behind the Workloads, Plan and Compare screens (plain python, no Textual).

* ``scan(path)``: the ``.wl`` files of a folder, each parsed and checked, with its
  validation state and every diagnostic;
* ``make_plan(spec, target)``: a plan, or the error that says why the target cannot be
  planned (unsupported is a value, shown in the plan pane, never a crash);
* ``Comparison``: two stored runs side by side — speed-up as the ratio of their
  steady-state median step times, price-performance where the run's ``spec.json``
  gives the target's ``price_per_hour``.
"""

from __future__ import annotations

import json
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
    from accelctl.dsl.parser import parse
    from accelctl.errors import AccelctlError, Diagnostic, attach_source
    from accelctl.spec.check import check_all

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return WorkloadFile(path, "", (), [Diagnostic("E001", f"cannot read: {exc}", path=str(path))])
    try:
        specs, diags = check_all(parse(text, str(path)))
    except AccelctlError as exc:
        specs, diags = (), attach_source(exc.diagnostics or [Diagnostic("E000", str(exc), path=str(path))], text)
    return WorkloadFile(path, text, tuple(specs) if not any(d.severity == "error" for d in diags) else (), list(diags))


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


def price_per_hour(run_dir: Path, target: str) -> float | None:
    """The target's ``price_per_hour`` from the run's ``spec.json`` (None: unknown)."""
    try:
        spec = json.loads((Path(run_dir) / "spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for t in spec.get("targets") or ():
        if t.get("name") == target:
            price = t.get("price_per_hour")
            return float(price) if price is not None else None
    return None


@dataclass
class RunSide:
    """One run of a comparison, with its steady-state figures (``steady_state``)."""

    record: Any
    stats: Any
    price_per_hour: float | None
    #: (value, unit) of the headline throughput: tokens/s for generation, else samples/s
    throughput: tuple[float | None, str]
    events: list = field(default_factory=list, repr=False)

    @property
    def median_s(self) -> float | None:
        return self.stats.step_time.median if self.stats.step_time else None

    @property
    def cost_per_million(self) -> float | None:
        """USD per million samples (tokens) at the steady-state median throughput."""
        value, _ = self.throughput
        if not value or self.price_per_hour is None:
            return None
        return self.price_per_hour / 3600.0 / value * 1e6


def run_side(record) -> RunSide:
    from accelctl.analysis.stats import steady_state

    events = record.events()
    stats = steady_state(events)
    if stats.generation is not None and stats.generation.tokens_per_s_median is not None:
        thr = (stats.generation.tokens_per_s_median, "tokens")
    elif stats.samples_per_s is not None:
        thr = (stats.samples_per_s.median, "samples")
    elif stats.tokens_per_s is not None:
        thr = (stats.tokens_per_s.median, "tokens")
    else:
        thr = (None, "")
    return RunSide(record, stats, price_per_hour(record.path, record.target), thr, events)


@dataclass
class Comparison:
    a: RunSide
    b: RunSide

    @property
    def speedup(self) -> float | None:
        """How many times faster B's steady-state median step is than A's (A / B)."""
        if not self.a.median_s or not self.b.median_s:
            return None
        return self.a.median_s / self.b.median_s

    @property
    def price_performance(self) -> float | None:
        """How many times more work per dollar B does than A (cost A / cost B)."""
        ca, cb = self.a.cost_per_million, self.b.cost_per_million
        if ca is None or cb is None or cb == 0 or self.a.throughput[1] != self.b.throughput[1]:
            return None
        return ca / cb

    @property
    def caveats(self) -> list[str]:
        out = []
        ra, rb = self.a.record, self.b.record
        if ra.workload != rb.workload:
            out.append(f"different workloads ({ra.workload} vs {rb.workload}): step times measure different work")
        for side, name in ((self.a, "A"), (self.b, "B")):
            if side.record.status != "ok":
                out.append(f"run {name} is {side.record.status}")
            if side.price_per_hour is None:
                out.append(f"no price known for run {name}'s target {side.record.target}")
        return out


def compare(record_a, record_b) -> Comparison:
    return Comparison(run_side(record_a), run_side(record_b))

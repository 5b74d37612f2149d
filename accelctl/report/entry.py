"""``Entry``: one measured configuration, from a stored run or from a seed's published figure.

Every report table, comparison, scaling table and plot is built from entries, so a
user's run and a seed's number go through the same formulas (``accelctl.analysis.cost``,
``accelctl.report.scaling``).

From a run (``entry_from_run``): the steady-state statistics are recomputed from the
run's ``events.jsonl`` (``accelctl.analysis.stats.steady_state``).  The headline step
time is the steady-state mean, or with two repeats or more the mean of the repeat means
(fastest and slowest dropped from five on); the throughput is the median of the measured
steps' rates (``accelctl.analysis.throughput``: the figure every surface shows).  Inference latency is the same mean time
of one call (generate() or a forward batch).  ``run_values`` holds one value per
independent run (its steady-state median step time per sample): what ``compare`` draws its
interval from.  ``entry_from_series`` makes one entry of the runs of a ``measure { repeat = N }``
series: the means of the runs' figures, one run value per run.  The target's price,
nodes, instance, precision and the task's ``train_steps`` come from the run's
``spec.json``; the device count is the run's world size.  Units: training on text
counts sequences/s, other training and inference samples/s, generation tokens/s.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accelctl.analysis import cost
from accelctl.analysis.throughput import headline as headline_throughput
from accelctl.analysis.ci import Interval
from accelctl.analysis.provenance import count_text, is_stand_in
from accelctl.analysis.stats import StepStats, measured_step_times, per_device, steady_state
from accelctl.run.store import SPEC_FILE, read_object
from accelctl.frozen import replace


#: the run column of a publication's figure (its name is ``Entry.publication``)
PUBLISHED = "published"


@dataclass(frozen=True)
class Entry:
    workload: str
    target: str
    #: a run id, or ``PUBLISHED`` for a publication's figure
    source: str
    label: str = ""
    #: the publication's short name ("AWS DL1 blog") for a published figure, else ""
    publication: str = ""
    device: str = ""
    instance: str = ""
    #: accelerators (processes) in total
    devices: int | None = None
    nodes: int | None = None
    #: global samples per step
    batch: int | None = None
    precision: str = ""
    task: str = ""
    status: str = "ok"
    #: throughput unit: samples/s, sequences/s, tokens/s
    unit: str = "samples/s"
    #: steady-state mean step time (s) and its distribution
    step_time_s: float | None = None
    step_time_median_s: float | None = None
    step_time_p90_s: float | None = None
    step_time_p99_s: float | None = None
    step_time_stdev_s: float | None = None
    step_time_ci: Interval | None = None
    #: steady-state throughput in ``unit``: the median of the measured steps' rates
    throughput: float | None = None
    tokens_per_s: float | None = None
    #: inference: mean time of one call (a generate() call, a batch); generation extras
    latency_s: float | None = None
    latency_p90_s: float | None = None
    ttft_s: float | None = None
    per_token_s: float | None = None
    mfu: float | None = None
    mem_bytes: int | None = None
    price_per_hour: float | None = None
    train_steps: int | None = None
    #: the job in samples: train_steps at the workload's reference global batch, the same on
    #: every target (equal work; ``accelctl.estimate.work``); None: job time from train_steps
    work_samples: float | None = None
    warmup_steps: int = 0
    warmup_time_s: float = 0.0
    repeats: int = 0
    ci_method: str = ""
    #: measured step times (straggler), and one mean per repeat (MLPerf-trimmed when >= 5)
    step_times: tuple[float, ...] = field(default=(), repr=False)
    repeat_values: tuple[float, ...] = field(default=(), repr=False)
    #: one value per independent run (process): its steady-state median step time per
    #: sample (s; per step when the samples per step are unknown)
    run_values: tuple[float, ...] = field(default=(), repr=False)
    #: what the workload computes, as canonical JSON of its spec's model, task, dataset,
    #: optimizer and seed ("" when unknown): runs compare only when it is the same
    configuration: str = field(default="", repr=False)
    #: a seed's own printed derived figures (per-device, efficiency ...), for display
    published: dict[str, Any] = field(default_factory=dict, repr=False)
    note: str = ""
    #: what model ran when it was not the real one: "stand-in, 164 k params" or "REHEARSAL of
    #: p5_fp8 on cpu, stand-in, 114 k params" ("" = the real model, or a published figure)
    ran: str = ""

    @property
    def name(self) -> str:
        name = self.label or self.target
        return f"{name} [{self.ran}]" if self.ran else name

    @property
    def per_device(self) -> float | None:
        return per_device(self.throughput, self.devices)

    @property
    def per_dollar(self) -> float | None:
        return cost.per_dollar(self.throughput, self.price_per_hour)

    @property
    def price_performance(self) -> float | None:
        return cost.price_performance(self.throughput, self.price_per_hour)

    @property
    def cost_per_million(self) -> float | None:
        return cost.cost_per_million(self.throughput, self.price_per_hour)

    @property
    def projected_hours(self) -> float | None:
        if self.work_samples and self.throughput and self.unit.split("/")[0] in ("samples", "sequences", "images"):
            return self.work_samples / self.throughput / cost.SECONDS_PER_HOUR
        return cost.projected_hours(self.train_steps, self.step_time_s)

    @property
    def projected_cost(self) -> float | None:
        hours = self.projected_hours
        return None if hours is None or self.price_per_hour is None else hours * self.price_per_hour


#: the keys of a spec.json that say what a workload computes (not where or how long)
CONFIGURATION_KEYS = ("name", "task", "model", "dataset", "optimizer", "seed")


def configuration(spec: dict[str, Any]) -> str:
    return json.dumps({k: spec.get(k) for k in CONFIGURATION_KEYS}, sort_keys=True, default=str) if spec else ""


def _target(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next((t for t in spec.get("targets") or [] if t.get("name") == name), {})


def entry_from_stats(stats: StepStats, *, workload: str, target: str, source: str, task: str,
                     samples_per_step: int | None = None, **facts: Any) -> Entry:
    """An entry from steady-state statistics plus the run's facts (device, price ...)."""
    st = stats.step_time
    tokens = stats.tokens_per_s.median if stats.tokens_per_s else None
    # the one throughput of every surface: the median of the measured steps' rates
    throughput, unit = headline_throughput(stats.to_dict(), task)
    if throughput is None and st is not None and samples_per_step:
        throughput = samples_per_step / st.median
    gen = stats.generation
    inference = task in ("generate", "infer")
    reps = stats.repeats
    # with two repeats or more the headline step time is the mean of the (kept) repeat means;
    # the throughput stays the median of the measured steps (``accelctl.analysis.throughput``)
    step = st.mean if st else None
    if reps is not None and reps.n >= 2 and st is not None:
        step = reps.mean
    return Entry(
        workload=workload, target=target, source=source, task=task, unit=unit,
        batch=samples_per_step,
        step_time_s=step, step_time_median_s=st.median if st else None,
        step_time_p90_s=st.p90 if st else None, step_time_p99_s=st.p99 if st else None,
        step_time_stdev_s=st.stdev if st else None, step_time_ci=stats.step_time_ci,
        throughput=throughput, tokens_per_s=tokens,
        latency_s=(step if inference else None),
        latency_p90_s=(gen.latency_p90_s if gen else st.p90 if st and inference else None),
        ttft_s=gen.ttft_mean_s if gen else None, per_token_s=gen.per_token_mean_s if gen else None,
        mfu=stats.mfu.mean if stats.mfu else None, mem_bytes=stats.peak_mem_bytes,
        warmup_steps=stats.warmup_steps, warmup_time_s=stats.warmup_time_s,
        repeats=reps.n if reps else 0,
        ci_method=(reps.method if reps and reps.n >= 2 else "Student t over the steps of one repeat"),
        repeat_values=reps.kept if reps else (),
        **facts,
    )


def entry_from_run(record: Any) -> Entry:
    """An entry for a stored run (``accelctl.run.store.RunRecord``); a run whose files have
    an unexpected shape (hand-edited, another version's) is an entry with no figures and
    status ``unreadable: <why>``, never an exception."""
    try:
        return _entry_from_run(record)
    except (AttributeError, TypeError, ValueError, KeyError, ArithmeticError, RecursionError) as exc:
        return Entry(workload=record.workload, target=record.target, source=record.id,
                     status=f"unreadable: run files of an unexpected shape ({type(exc).__name__}: {exc})")


def _entry_from_run(record: Any) -> Entry:
    if record.unreadable:  # what the store calls unreadable has no figures, whatever its events say
        return Entry(workload=record.workload, target=record.target, source=record.id, status=record.status)
    summary = record.summary or {}
    # a FIFO, a link, a field or a line of the wrong shape (a zero or negative step time ...)
    events, why = record.checked_events()
    spec: dict[str, Any] = {}
    if not why:
        spec, why = read_object(record.path / SPEC_FILE)
    if why:
        return Entry(workload=record.workload, target=record.target, source=record.id, status=f"unreadable: {why}")
    tgt = _target(spec, record.target)
    stats = steady_state(events)
    times = tuple(t for _, _, t in measured_step_times(events))
    first = next((e for e in events if getattr(e, "phase", None) == "measure" and getattr(e, "samples", 0)), None)
    world = summary.get("world_size") or stats.ranks or tgt.get("devices")
    nodes = tgt.get("nodes") or 1
    task = summary.get("task") or ((spec.get("task") or {}).get("kind", "") if isinstance(spec.get("task"), dict) else "")
    entry = entry_from_stats(
        stats, workload=record.workload, target=record.target, source=record.id, task=task,
        samples_per_step=first.samples if first is not None else None,
        device=summary.get("device") or tgt.get("device", ""), instance=tgt.get("instance", ""),
        devices=int(world) if world else None, nodes=int(nodes),
        precision=(tgt.get("precision") or {}).get("dtype", ""), status=record.status,
        price_per_hour=tgt.get("price_per_hour"),
        train_steps=(spec.get("task") or {}).get("train_steps") or None,
        work_samples=_work_samples(spec),
        step_times=times,
        run_values=((stats.step_time.median / (first.samples if first is not None and first.samples else 1),)
                    if stats.step_time else ()),
        configuration=configuration(spec),
    )
    ran = summary.get("what_ran") or {}
    if is_stand_in(ran):
        params = count_text((ran.get("model") or {}).get("params"))
        rehearsal = ran.get("rehearsal")
        # a rehearsal ran on this CPU: the target's instance and price do not apply to it
        # (its device's own path on this CPU where it says so: "the XLA CPU device (torch-xla ...)")
        on = (rehearsal or {}).get("on")
        where = on if on and on != "this CPU" else entry.device
        # nor its job time and cost (the target's train_steps at this CPU's step time), nor an
        # MFU above 1 (a FLOP count against a peak of another device, or a stale calibration)
        entry = replace(
            entry, ran=(f"REHEARSAL of {rehearsal['of']} on {where}, stand-in, {params}" if rehearsal
            else f"stand-in, {params}"),
            **({"instance": "", "price_per_hour": None, "nodes": 1, "train_steps": None, "work_samples": None,
                "mfu": entry.mfu if entry.mfu is not None and entry.mfu <= 1 else None} if rehearsal else {}))
    return entry




def _host(device) -> bool:
    from accelctl.catalog import DEVICES

    return device in DEVICES and DEVICES[device].host


def _work_samples(spec: dict[str, Any]) -> float | None:
    """train_steps x the global batch of the spec's first target that is not the host CPU
    (``accelctl.estimate.work.reference``, on the stored spec.json)."""
    steps = (spec.get("task") or {}).get("train_steps")
    targets = [t for t in spec.get("targets") or () if isinstance(t, dict)]
    ref = next((t for t in targets if not _host(t.get("device"))), targets[0] if targets else None)
    if not steps or ref is None:
        return None
    b, p = ref.get("batch") or {}, ref.get("parallel") or {}
    dp = max(1, (ref.get("nodes") or 1) * (ref.get("devices") or 1) // ((p.get("tp") or 1) * (p.get("pp") or 1)))
    return float(steps * (b.get("global_size") or (b.get("micro") or 1) * (b.get("accumulation") or 1) * dp))


def _mean(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return statistics.fmean(xs) if len(xs) == len(values) and xs else None


def series_status(records: Sequence[Any], statuses: Sequence[str] | None = None) -> str:
    """ok when every run of the series is there and ok, else what is missing or wrong
    (``statuses``: each run's, when the entries know better than the records)."""
    statuses = list(statuses) if statuses is not None else [r.status for r in records]
    of = max([int(r.series.get("of") or 0) for r in records if isinstance(r.series.get("of"), int)] + [len(records)])
    ok = statuses.count("ok")
    if ok == of:
        return "ok"
    bad = [f"{r.id}: {st}" for r, st in zip(records, statuses) if st != "ok"]
    return f"incomplete series: {ok} of {of} runs ok" + (f" ({'; '.join(bad)})" if bad else "")


def entry_from_series(records: Sequence[Any]) -> Entry:
    """One entry for the runs of a series (or a single run): each figure the mean over the
    runs, ``run_values`` one per run, ``source`` the series' first run and how many."""
    entries = [entry_from_run(r) for r in records]
    if len(entries) == 1:
        return entries[0]
    first = entries[0]
    times = [e.run_values[0] for e in entries if e.run_values]
    return replace(
        first,
        source=f"{records[0].series_id or first.source} (series of {len(entries)} runs)",
        status=series_status(records, [e.status for e in entries]),
        step_time_s=_mean([e.step_time_s for e in entries]),
        step_time_median_s=_mean([e.step_time_median_s for e in entries]),
        step_time_ci=None,
        throughput=_mean([e.throughput for e in entries]),
        tokens_per_s=_mean([e.tokens_per_s for e in entries]),
        latency_s=_mean([e.latency_s for e in entries]),
        step_times=tuple(t for e in entries for t in e.step_times),
        run_values=tuple(times),
        repeats=len(entries),
        ci_method="over the per-run medians of independent runs",
        configuration=first.configuration if all(e.configuration == first.configuration for e in entries) else "mixed",
    )

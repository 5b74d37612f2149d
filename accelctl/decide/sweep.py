"""A scaling study for real: one target run at several device (and node) counts.

For each count the target is replaced (``frozen.replace``) with ``devices = n``
(and ``nodes``), planned with ``accelctl.api.plan`` and run with ``accelctl.api.launch``,
one after the other (never two at once: they would share the machine).  Weak scaling,
as in seed 001: the micro-batch and gradient accumulation per device stay, so the
global batch grows with the device count (a ``global`` batch the workload fixed is
dropped).  The price per hour scales with the node count (it is the allocation's).
The backend is what ``plan`` chooses for each count unless ``backend`` forces one
(``torchrun`` makes the 1-device point go through the same launcher as the others).

A node sweep (``--nodes 1,2``) runs through the target's engine (or ``engine``): on a
scheduler (``engine = slurm``) each point is its own job of that many nodes.  Every point of
a node sweep uses the backend the largest point plans with, so the 1-node baseline goes
through the same launcher and engine as the rest (a 1-device point would otherwise plan the
single-process backend, which a multi-node engine does not place).  The device count per
node defaults to the target's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from accelctl.frozen import replace


def parse_counts(text: str) -> list[int]:
    """"1,2,4" -> [1, 2, 4] (positive, in the order given, no duplicates)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        n = int(part)
        if n <= 0:
            raise ValueError(f"device and node counts must be positive, not {n}")
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError(f"no counts in {text!r}")
    return out


def sweep_targets(target: Any, devices: Sequence[int], nodes: Sequence[int] = (1,), backend: str = "") -> list[Any]:
    """The target at every (nodes, devices) pair, in the order nodes-major."""
    out = []
    for n in nodes:
        for d in devices:
            price = target.price_per_hour * n / target.nodes if target.price_per_hour is not None else None
            out.append(replace(
                target, devices=d, nodes=n, price_per_hour=price, backend=backend or target.backend,
                batch=replace(target.batch, global_size=None)))
    return out


def run_point(c, source: str | None, req, progress: Callable[[str], None]) -> list[Any]:
    """One point of a sweep (``c``: an ``accelctl.run.supervision.orchestrate.Chosen``, its ``why`` the point's
    label), as ``accelctl run`` runs it: refused before anything starts when it cannot start
    here, and ``measure { repeat = N }`` as N independent processes of one series; the stored
    runs (``RunRecord``), in order."""
    from accelctl.run.supervision import orchestrate
    from accelctl.run.store import read_run

    orchestrate.refuse_unstartable([c], source, req)
    series = orchestrate.Series(c, source, req)
    return [read_run(Path(result.run_dir)) for result, _ in series.run(lambda: [], lambda text, error=False: progress(
        f"sweep: {c.why}: {text}"))]


def run_sweep(path: str, target_name: str, devices: Sequence[int], *, nodes: Sequence[int] = (1,),
              workload: str | None = None, engine: str | None = None, backend: str = "",
              runs_root: str | None = None, progress: Callable[[str], None] = print, host=None) -> list[Any]:
    """Run every point; returns the stored runs (``RunRecord``) in run order.  A stopped point
    (Ctrl-C) ends the sweep.  ``host``: the ``HostFacts`` every point is planned for (None: this machine)."""
    from accelctl.api import load_selected_source, named_target, plan
    from accelctl.report.entry import entry_from_run
    from accelctl.run.supervision.orchestrate import Chosen, Request, one_process

    source, specs = load_selected_source(path, workload)  # read once: the runs store what was checked
    spec = specs[0]
    base = named_target(spec, target_name)
    devices = list(devices) or [base.devices]
    if not backend and max(nodes) > 1:
        largest = sweep_targets(base, [max(devices)], [max(nodes)])[0]
        backend = plan(spec, largest, engine, host=host).backend
    req = Request(engine=engine, runs_dir=runs_root)
    records = []
    for t in sweep_targets(base, devices, nodes, backend):
        point = replace(spec, targets=tuple(t if x.name == base.name else x for x in spec.targets))
        one, t1, n = one_process(point, t)
        p = plan(one, t1, engine, host=host)
        label = f"{spec.name} / {t.name}: nodes {t.nodes} x devices {t.devices}"
        progress(f"sweep: {label} ({p.backend}) ...")
        t0 = time.perf_counter()
        done = run_point(Chosen(point, p, label, n), source, req, progress)
        for rec in done:
            entry = entry_from_run(rec)
            thr = f", {entry.throughput:,.2f} {entry.unit}" if entry.throughput else ""
            progress(f"  -> {rec.id}: {rec.status}{thr} ({time.perf_counter() - t0:.1f} s)")
        records += done
        if any(rec.status == "stopped" for rec in done):
            break
    return records

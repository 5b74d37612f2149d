"""``accelctl fit --probe``: one real training step at the micro-batch the memory model found,
under the target's memory, that catches the out-of-memory failure.

Each probe is a child process (this module, ``python -m``) that caps its data
segment (``RLIMIT_DATA``: heap and anonymous mappings, what tensors live in) at the target's
memory and runs the point through ``accelctl.api`` (plan, launch: the worker inherits the
cap), one measured step and no warm-up.  The run's failure message tells an out-of-memory
failure (``MemoryError``, torch's ``can't allocate memory``, ``std::bad_alloc``) from any
other.  Only where this machine has the target's device: the host CPU for a cpu target;
elsewhere the probe is NOT RUN (exit 4), never a pass.

What the model leaves out on this CPU is glibc's heap: freed activations stay in it once glibc
raises its mmap threshold, so the model's largest micro-batch can run out of memory under the
cap -- the probe then bisects and says NOT confirmed, never a pass (figures: docs/bench.md).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from accelctl.frozen import replace

OOM = re.compile(r"MemoryError|can't allocate memory|Cannot allocate memory|std::bad_alloc|out of memory", re.I)


@dataclass
class Probe:
    device: str
    micro: int
    limit: int
    #: micro-batch -> "ok", "out of memory: ...", "failed: ..."
    results: dict[int, str] = field(default_factory=dict)
    not_run: str = ""
    #: the data segment a process of the run held at micro-batch 1 beyond the model's count (added
    #: to the cap): the interpreter, torch and its libraries' writable data, thread stacks
    runtime: int = 0

    @property
    def confirmed(self) -> bool:
        return not self.not_run and self.results.get(self.micro) == "ok"

    def record(self) -> dict:
        return {"micro": self.micro, "limit_bytes": self.limit, "runtime_bytes": self.runtime, "results": {str(k): v for k, v in self.results.items()},
                "confirmed": self.confirmed, "not_run": self.not_run}

    def lines(self) -> list[str]:
        if self.not_run:
            return [f"  probe: NOT RUN: {self.not_run}"]
        out = [f"  probe (one real step each, the worker capped at {self.limit / 1e9:.2f} GB of data: the target's "
               f"memory + {self.runtime / 1e9:.2f} GB of data segment the worker held at micro-batch 1 beyond the "
               f"model's count):"]
        out += [f"    micro-batch {m}: {r}" for m, r in sorted(self.results.items())]
        ran = [m for m, r in self.results.items() if r == "ok"]
        oom = [m for m, r in self.results.items() if r.startswith("out of memory")]
        if ran and oom and min(oom) > max(ran):
            out.append(f"  probe: here the largest that ran is {max(ran)}, the smallest that ran out of memory "
                       f"{min(oom)} (the model's answer: {self.micro})")
        out.append(f"  probe: micro-batch {self.micro} " + ("CONFIRMED" if self.confirmed else "NOT confirmed"))
        return out


def probe_fit(path: str, spec, target, micro: int, runs_root=None) -> Probe:
    """The probes: micro-batch 1 uncapped (what the process holds besides the model's count:
    the interpreter, torch, allocator slack -- the part the model's 2 GB reserve stands for on
    an accelerator), then ``micro`` and ``micro + 1`` capped at the target's memory plus that
    runtime; where ``micro`` runs out of memory, the boundary bisected (``boundary``)."""
    from accelctl.decide.fit import at_micro, host_memory
    from accelctl.catalog import DEVICES

    capacity = target.memory_bytes or host_memory()
    p = Probe(target.device, micro, capacity)
    if not DEVICES[target.device].host:
        p.not_run = (f"this machine has no {target.device} device (the probe runs where the target's device is; "
                     "the answer above is the memory model's alone)")
        return p
    if micro < 1:
        p.not_run = "nothing fits by the model: no micro-batch to confirm"
        return p
    first, held = one_step(path, spec.name, target.name, 1, 0, runs_root)
    if first != "ok" or not held:
        p.not_run = f"micro-batch 1 without a cap did not run ({first}): nothing to measure the runtime by"
        return p
    p.runtime = max(0, held - int(at_micro(spec, target, 1)[1].total))
    p.limit = capacity + p.runtime
    p.results = boundary(lambda m: one_step(path, spec.name, target.name, m, p.limit, runs_root)[0], micro)
    return p


#: probes after the first out-of-memory failure: halving to a micro-batch that runs, then bisecting
MOST_PROBES = 8


def boundary(step, micro: int) -> dict[int, str]:
    """{micro-batch: result} of the probes ``step(m)`` ran: ``micro`` and ``micro + 1`` where
    ``micro`` runs; where it runs out of memory, halved until one runs, then bisected between
    the two until they are one sixteenth of ``micro`` apart (or ``MOST_PROBES`` probes): the
    largest micro-batch that runs here within that step.  Any other failure stops it."""
    out = {micro: step(micro)}
    if out[micro] == "ok":
        out[micro + 1] = step(micro + 1)
        return out
    lo, hi = 0, micro
    while out[hi].startswith("out of memory") and hi > 1 and len(out) <= MOST_PROBES:
        m = max(1, hi // 2) if not lo else (lo + hi) // 2
        out[m] = step(m)
        if out[m] == "ok":
            lo = m
            if hi - lo <= max(1, micro // 16):
                break
        elif out[m].startswith("out of memory"):
            hi = m
        else:
            break
    return out


def one_step(path: str, workload: str, target: str, micro: int, limit: int, runs_root) -> tuple[str, int | None]:
    """("ok" | "out of memory: ..." | "failed: ...", the largest data segment (what
    ``RLIMIT_DATA`` caps: ``DataSegmentWatch``) a process of the run reached)."""
    cmd = [sys.executable, "-m", __name__, str(path), workload, target, str(micro), str(limit),
           str(runs_root or "")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    try:
        out = json.loads(last)
    except ValueError:
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return (f"out of memory: {why[:200]}" if OOM.search(proc.stderr) else f"failed: {why[:200]}"), None
    if out["status"] == "ok":
        return "ok", out.get("data_peak")
    msg = (out.get("message") or "").strip()
    if not msg:
        return f"failed: {out['status']}", None
    return ("out of memory: " if OOM.search(msg) else "failed: ") + msg.splitlines()[-1][:200], None


def _child(path: str, workload: str, target_name: str, micro: int, limit: int, runs_root: str) -> dict:
    import resource

    if limit:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    from accelctl.api import launch, load_selected_source, plan
    from accelctl.contract.hostfacts import HostFacts
    from accelctl.run.store import read_run
    from accelctl.workload.types import MeasureSpec

    source, specs = load_selected_source(path, workload)
    spec = specs[0]
    once = MeasureSpec(warmup=0, steps=1)
    t = spec.target(target_name)
    # memory_bytes 0 (the host's): the plan's own E530 check does not stop a step past the model's
    # answer; the cap above is what holds it to the target's memory
    t = replace(t, batch=replace(t.batch, micro=micro, global_size=None), measure=None,
                memory_bytes=0)
    spec = replace(spec, measure=once, targets=tuple(t if x.name == t.name else x for x in spec.targets))
    # the probe's process plans for the machine it runs on (this one): its facts, read here
    handle = launch(plan(spec, t, host=HostFacts.here()), source_text=source, spec_json=spec.to_json(), runs_root=runs_root or None)
    with DataSegmentWatch() as watch:
        result = handle.wait()
    record = read_run(Path(result.run_dir))
    failure = (record.summary or {}).get("failure") or {}
    return {"status": result.status, "message": failure.get("message", ""), "run": str(result.run_dir),
            "data_peak": watch.peak if result.status == "ok" else None}


class DataSegmentWatch:
    """The largest data segment (psutil's ``data``, read every 20 ms) any descendant of this
    process reaches while the block runs: the figure ``RLIMIT_DATA`` holds each process to.
    The worker's resident memory is smaller by the libraries' writable data and thread
    stacks, which a cap counts all the same."""

    def __init__(self) -> None:
        import threading

        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "DataSegmentWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.wait(0.02):
            for child in me.children(recursive=True):
                try:
                    self.peak = max(self.peak, child.memory_info().data)
                except psutil.Error:  # ended between the listing and the read
                    continue


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(_child(a[0], a[1], a[2], int(a[3]), int(a[4]), a[5])))

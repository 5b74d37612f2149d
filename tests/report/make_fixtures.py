"""Write the synthetic run store under tests/report/fixtures/store (deterministic).

    .venv/bin/python tests/report/make_fixtures.py

Each run folder holds what the report reads from a real run: ``events.jsonl`` (typed
events, as the runner merges them), ``spec.json`` (the keys of a checked WorkloadSpec
that reports use: targets' device, instance, nodes, devices, price, precision, batch;
task kind and train_steps) and ``summary.json`` (as ``accelctl.run.store.summary`` writes it,
stats from ``steady_state``).  Step times are fixed numbers, so every figure of the
golden outputs can be checked by hand.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from accelctl.analysis.stats import steady_state  # noqa: E402
from accelctl.contract.events import PhaseChanged, RunFinished, RunStarted, StepMetrics  # noqa: E402

ROOT = Path(__file__).with_name("fixtures") / "store"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def target(name, devices, price, nodes=1, instance="", dtype="fp32", micro=8, device="cpu"):
    return {"name": name, "device": device, "instance": instance, "nodes": nodes, "devices": devices,
            "price_per_hour": price, "precision": {"dtype": dtype, "fp8": None},
            "batch": {"micro": micro, "accumulation": 1, "global_size": None}}


TRAIN_SPEC = {
    "name": "fixture_train",
    "task": {"kind": "pretrain", "train_steps": 10000},
    "measure": {"warmup": 2, "steps": 4, "repeat": 5},
    "targets": [target("small", 1, 1.0), target("big", 2, 1.5), target("big4", 4, 2.5)],
}
GEN_SPEC = {
    "name": "fixture_gen",
    "task": {"kind": "generate", "train_steps": 0},
    "measure": {"warmup": 1, "steps": 5, "repeat": 1},
    "targets": [target("cpu", 1, None, micro=1)],
}


def train_events(run_id, tgt, base, world, repeats=5, steps=4, warmup=2):
    """Rank r's step i of repeat k: base x (1 + 0.01 k + 0.005 i) + 0.001 r seconds.
    Repeat k = 2 is slow (x 1.2): the outlier MLPerf trimming drops."""
    samples = 8 * world
    ev = [RunStarted(run_id=run_id, workload="fixture_train", target=tgt, backend="cpu", rank=r, world_size=world,
                     time_unix_s=T0) for r in range(world)]
    ev.append(PhaseChanged(phase="warmup", rank=0, time_unix_s=T0 + 1))
    n = 0
    for i in range(warmup):
        n += 1
        for r in range(world):
            ev.append(StepMetrics(step=n, phase="warmup", step_time_s=base * 3, rank=r, loss=7.0, samples=samples,
                                  tokens=samples * 64, time_unix_s=T0 + 1 + n))
    for k in range(repeats):
        ev.append(PhaseChanged(phase="measure", rank=0, repeat=k, time_unix_s=T0 + 10 + 10 * k))
        for i in range(steps):
            n += 1
            for r in range(world):
                t = round(base * (1 + 0.01 * k + 0.005 * i) * (1.2 if k == 2 else 1.0) + 0.001 * r, 9)
                ev.append(StepMetrics(step=n, phase="measure", step_time_s=t, rank=r, repeat=k, loss=6.0 - 0.05 * n,
                                      samples=samples, tokens=samples * 64, samples_per_s=samples / t,
                                      tokens_per_s=samples * 64 / t, mfu=0.02 / world, mem_bytes=(300 + 10 * r) * 2**20,
                                      time_unix_s=T0 + 10 + 10 * k + i))
    ev += [RunFinished(rank=r, steps=n, wall_s=60.0, time_unix_s=T0 + 60) for r in range(world)]
    return ev


def gen_events(run_id):
    ev = [RunStarted(run_id=run_id, workload="fixture_gen", target="cpu", backend="cpu", time_unix_s=T0)]
    lat = [0.80, 0.50, 0.52, 0.48, 0.51, 0.49]  # the first is warm-up
    for n, t in enumerate(lat, start=1):
        phase = "warmup" if n == 1 else "measure"
        ev.append(StepMetrics(step=n, phase=phase, step_time_s=t, samples=1, tokens=32, samples_per_s=1 / t,
                              tokens_per_s=32 / t, mem_bytes=200 * 2**20, new_tokens=32, ttft_s=round(t / 8, 6),
                              per_token_s=round(t * 7 / 8 / 31, 6), time_unix_s=T0 + n))
    ev.append(RunFinished(steps=len(lat), wall_s=5.0, time_unix_s=T0 + 10))
    return ev


def write_run(run_id, spec, tgt, events, status="ok", task="pretrain", root=None):
    d = (root or ROOT) / run_id
    d.mkdir(parents=True)
    (d / "events.jsonl").write_text("".join(e.to_json() + "\n" for e in events), encoding="utf-8")
    (d / "spec.json").write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    world = max((e.world_size for e in events if isinstance(e, RunStarted)), default=1)
    summary = {
        "schema_version": 1, "run_id": run_id, "status": status, "workload": spec["name"], "target": tgt,
        "backend": "cpu" if world == 1 else "torchrun", "engine": "local", "device": "cpu", "task": task,
        "started": "2026-01-01T00:00:00Z", "started_unix_s": T0, "finished_unix_s": T0 + 60,
        "world_size": world, "measure": spec["measure"], "stats": steady_state(events).to_dict(),
    }
    (d / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return d


def main() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    runs = [
        ("20260101-000000-fixture_train-small-0001", "small", 0.100, 1),
        ("20260101-000100-fixture_train-big-0002", "big", 0.110, 2),
        ("20260101-000200-fixture_train-big4-0003", "big4", 0.125, 4),
    ]
    for run_id, tgt, base, world in runs:
        write_run(run_id, TRAIN_SPEC, tgt, train_events(run_id, tgt, base, world))
    failed = "20260101-000300-fixture_train-small-0004"
    write_run(failed, TRAIN_SPEC, "small", train_events(failed, "small", 0.5, 1, repeats=1, steps=2), status="failed")
    gen = "20260101-000400-fixture_gen-cpu-0005"
    write_run(gen, GEN_SPEC, "cpu", gen_events(gen), task="generate")


if __name__ == "__main__":
    main()

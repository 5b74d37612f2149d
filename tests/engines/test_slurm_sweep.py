"""``accelctl sweep FILE -t T --nodes 1,2`` through the slurm engine on the local two-node
cluster: each point is its own Slurm job, and the printed table is seed 001's scaling
efficiency (per-device throughput over the 1-node baseline's) computed from those runs."""

from __future__ import annotations

import csv
import io
import time

import pytest

WORKLOAD = """
workload slurm_sweep {
  task pretrain { objective = classification }
  model vit(layers = 1, hidden = 32, heads = 2, image_size = 16, patch = 8, classes = 10)
  dataset synthetic(image_size = 16, channels = 3, classes = 10)
  optimizer sgd(lr = 0.01, momentum = 0.9)
  precision fp32
  batch { micro = 4 }
  measure { warmup = 1 step  steps = 8 steps }
  engine slurm { partition = "debug"  time_limit = 10 min }
  target two_nodes { device = cpu  devices = 1  nodes = 2  threads = 1  parallel = ddp  engine = slurm }
}
"""


@pytest.mark.slow
def test_a_node_sweep_runs_one_slurm_job_per_point_and_prints_the_efficiency(slurm_cluster, tmp_path, capsys):
    from accelctl.cli import main
    from accelctl.run.store import list_runs

    wl = tmp_path / "sweep.wl"
    wl.write_text(WORKLOAD)
    t0 = time.perf_counter()
    code = main(["sweep", str(wl), "-t", "two_nodes", "--nodes", "1,2", "--runs-dir", str(tmp_path / "runs"),
                 "--format", "csv"])
    wall = time.perf_counter() - t0
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err[-4000:] + out
    runs = list_runs(tmp_path / "runs")
    assert len(runs) == 2 and {r.status for r in runs} == {"ok"}, [(r.id, r.status) for r in runs]
    # both points went through Slurm with the same launcher, as jobs of 1 and 2 nodes
    assert {r.engine for r in runs} == {"slurm"} and {r.backend for r in runs} == {"torchrun"}
    assert sorted(r.summary["world_size"] for r in runs) == [1, 2]
    assert all(r.scheduler is not None and r.scheduler.state == "COMPLETED" for r in runs)
    nodes = sorted(slurm_cluster.run("scontrol", "show", "job", "-o", r.scheduler.job_id).stdout.split("NumNodes=")[1]
                   .split()[0] for r in runs)
    assert nodes == ["1", "2"]

    rows = list(csv.DictReader(io.StringIO(out)))  # one CSV table; its "table" column groups the rows
    blocks = [[r for r in rows if r["table"] == t] for t in dict.fromkeys(r["table"] for r in rows)]
    scaling = next(b for b in blocks if b[0]["table"].startswith("scaling-slurm_sweep"))
    one, two = sorted(scaling, key=lambda r: int(r["accelerators"]))
    assert (one["nodes"], two["nodes"]) == ("1", "2")
    thr1, thr2 = float(one["throughput"]), float(two["throughput"])
    assert thr1 > 0 and thr2 > 0 and float(one["efficiency"]) == 1.0
    assert float(two["efficiency"]) == pytest.approx((thr2 / 2) / thr1, rel=1e-9)
    by_world = {r.summary["world_size"]: r for r in runs}
    assert {one["source"], two["source"]} == {by_world[1].id, by_world[2].id}
    print(f"\nslurm sweep nodes 1,2: {wall:.1f} s; efficiency at 2 nodes {float(two['efficiency']):.1%}")

"""Preflight: the plan's own launches and engine with a seconds-long all-reduce in place of the
worker.  The swap itself (fast); a real one on the local Slurm cluster that passes, and a
torchrun rendezvous that cannot complete ending within its timeout naming the missing node
(slow)."""

from __future__ import annotations

import time

import pytest

from accelctl import api
from accelctl.plan.preflight import PREFLIGHT_MODULE, preflight_plan

WORKLOAD = """
workload pf {
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 32 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1 }
  measure { warmup = 1 steps  steps = 3 steps }
  engine torchrun { join_timeout = 10 s }
  engine slurm { partition = "debug"  time_limit = 5 min }
  target tr { device = cpu  devices = 1  nodes = 2  threads = 1  parallel = ddp  engine = torchrun }
  target sl { device = cpu  devices = 1  nodes = 2  threads = 1  parallel = ddp  engine = slurm }
  target ds { device = cpu  devices = 1  nodes = 2  threads = 1  parallel = zero(stage = 1)  engine = slurm }
  target hpu { device = gaudi2  devices = 8  precision = bf16  parallel = data }
}
"""


def plan_of(target: str):
    specs, diags = api.validate_text(WORKLOAD)
    assert not diags, diags
    return api.plan(specs[0], target)


@pytest.mark.parametrize("target", ["tr", "sl", "ds", "hpu"])
def test_the_preflight_is_the_same_plan_with_the_worker_swapped(target):
    p = plan_of(target)
    pre = preflight_plan(p)
    assert pre is not None and pre.launches and pre.engine == p.engine and pre.job == p.job
    text = "\n".join([*(" ".join(ln.argv) for ln in pre.launches), *(f.content for f in pre.files)])
    assert PREFLIGHT_MODULE in text
    # nothing but the module name differs: same launchers, rendezvous, #SBATCH lines, env
    undo = "\n".join([*(" ".join(ln.argv) for ln in pre.launches), *(f.content for f in pre.files)]).replace(
        PREFLIGHT_MODULE, "accelctl.worker")
    assert undo == "\n".join([*(" ".join(ln.argv) for ln in p.launches), *(f.content for f in p.files)])
    assert [ln.env for ln in pre.launches] == [ln.env for ln in p.launches]


def test_a_plan_that_never_starts_the_worker_has_no_preflight():
    (spec,) = [s for s in api.load("workloads/bloomz.wl") if s.name == "bloomz_176b"]
    assert preflight_plan(api.plan(spec, "gaudi2_example")) is None


@pytest.mark.slow
def test_a_preflight_on_the_slurm_cluster_all_reduces_over_both_nodes(slurm_cluster, tmp_path):
    pre = api.preflight(plan_of("sl"), planned=2, runs_dir=tmp_path, timeout_s=180)
    assert pre.ok, pre.message
    assert pre.world_size == 2 and pre.all_reduce_s is not None and pre.all_reduce_s < 5
    assert pre.message.startswith("preflight ok: all-reduce over 2 rank(s) (slurm, torchrun, gloo)"), pre.message
    # a Slurm job of the same shape, stored apart from the real runs
    job_id = (pre.run_dir / "slurm_job_id").read_text().strip()
    info = slurm_cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    assert "NumNodes=2" in info and "JobState=COMPLETED" in info, info
    assert pre.run_dir.parent == tmp_path / "preflight" and api.list_runs(tmp_path) == []
    print(f"\nslurm preflight: {pre.message}")


@pytest.mark.slow
def test_a_rendezvous_that_cannot_complete_fails_the_preflight_naming_the_node(tmp_path, capsys):
    from accelctl.cli import main

    wl = tmp_path / "pf.wl"
    wl.write_text(WORKLOAD)
    t0 = time.monotonic()
    # node 1's agent is never started: the rendezvous cannot complete
    code = main(["run", str(wl), "-t", "tr", "--headless", "--preflight", "--launch", "node0",
                 "--runs-dir", str(tmp_path / "runs")])
    wall = time.monotonic() - t0
    out = capsys.readouterr().out
    assert code == 1, out
    line = next(ln for ln in out.splitlines() if "preflight failed" in ln)
    assert "rendezvous pf-tr at 127.0.0.1:" in line and "timed out after 10 s: node(s) 1 never joined" in line, line
    assert wall < 10 + 30, wall  # the agent's import time plus join_timeout
    # the real run never started
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["preflight"]
    print(f"\nbroken rendezvous: preflight failed after {wall:.1f} s")


@pytest.mark.slow
def test_doctor_plan_runs_the_preflight_of_a_target(tmp_path, capsys):
    """``accelctl doctor --plan FILE -t T``: the preflight alone (two torchrun agents on loopback)."""
    from accelctl.cli import main

    wl = tmp_path / "pf.wl"
    wl.write_text(WORKLOAD)
    assert main(["doctor", "--plan", str(wl), "-t", "tr", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "preflight ok: all-reduce over 2 rank(s) (torchrun, torchrun, gloo)" in out, out
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["preflight"]

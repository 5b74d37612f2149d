"""The torchrun engine: one agent per node at a c10d rendezvous; two agents on loopback (slow)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from accelctl import api
from accelctl.contract.events import RunStarted, StepMetrics, read_events
from accelctl.contract.plan import FREE_PORT
from accelctl.errors import PlanError
from accelctl.plan.registry import ENGINES
from accelctl.run import procgroup

TEMPLATE = """
workload tr2 {
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 32 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1 }
  measure { warmup = 1 steps  steps = 3 steps }
  engine torchrun { BLOCK }
  target two { device = cpu  devices = 1  nodes = 2  threads = 1  parallel = ddp  engine = torchrun }
}
"""


@pytest.fixture
def runs(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "runs"
    monkeypatch.setenv("ACCELCTL_RUNS_DIR", str(root))
    return root


def plan_of(block: str = "", target: str = "two"):
    specs, diags = api.validate_text(TEMPLATE.replace("BLOCK", block))
    assert not diags, diags
    return api.plan(specs[0], target)


def test_one_agent_per_node_with_the_rendezvous():
    p = plan_of("join_timeout = 10 s")
    assert p.engine == "torchrun" and p.backend == "torchrun"
    assert [ln.name for ln in p.launches] == ["node0", "node1"]
    for i, ln in enumerate(p.launches):
        assert ln.argv == ("torchrun", "--nnodes=2", "--nproc-per-node=1", f"--node-rank={i}", "--rdzv-backend=c10d",
                           f"--rdzv-endpoint=127.0.0.1:{FREE_PORT}", "--rdzv-id=tr2-two",
                           "--rdzv-conf=join_timeout=10", "--max-restarts=0",
                           "-m", "accelctl.worker", "{run_dir}/job.json")
        assert ln.processes == 1 and ln.env["OMP_NUM_THREADS"] == "1"
    assert any("run launch nodeI on node I" in n for n in p.notes)


def test_every_agent_command_parses_with_torchs_parser():
    pytest.importorskip("torch")
    specs, _ = api.validate_text(TEMPLATE.replace("BLOCK", 'rdzv_endpoint = "node-0.cluster:29400"  rdzv_id = "job_7"'))
    p = api.plan(specs[0], "two")
    assert "--rdzv-endpoint=node-0.cluster:29400" in p.launches[1].argv and "--rdzv-id=job_7" in p.launches[1].argv
    results = api.check_plan(p, specs[0])
    named = [r for r in results if "torchrun parser" in r.tool]
    assert len(named) == 2 and all(r.ok for r in named), results


def test_static_rendezvous_uses_master_addr_and_port():
    p = plan_of('rdzv_backend = static  rdzv_endpoint = "10.0.0.1:29400"  master_port = 29611')
    argv = p.launches[1].argv
    assert "--master-addr=10.0.0.1" in argv and "--master-port=29611" in argv and "--node-rank=1" in argv
    assert not any(a.startswith("--rdzv") for a in argv)


@pytest.mark.parametrize("block,line_has,code", [
    ('rdzv_endpoint = "node0"', "rdzv_endpoint", "E217"),         # no port: refused by the check
    ('rdzv_endpoint = "node0:70000"', "rdzv_endpoint", "E217"),   # port out of range
    ('rdzv_endpoint = "a b:1"', "rdzv_endpoint", "E217"),         # not a host
    ('rdzv_endpoint = "$(x):1"', "rdzv_endpoint", "E217"),
    ('rdzv_id = "x; rm -rf /"', "rdzv_id", "E216"),
    ('rdzv_id = "-x"', "rdzv_id", "E216"),
    ("master_port = 29611", "master_port", "E548"),               # master_port is for static: the engine's
])
def test_refusals_are_positioned(block, line_has, code):
    text = TEMPLATE.replace("BLOCK", block)
    specs, diags = api.validate_text(text)
    if code == "E548":  # valid: validate warns with plan's refusal at its line (issue 23)
        assert {(d.code, d.severity) for d in diags} == {("E548", "warning")}, diags
        with pytest.raises(PlanError) as e:
            api.plan(specs[0], "two")
        diags = e.value.diagnostics
    d = diags[0]
    assert d.code == code and d.span is not None and line_has in text.splitlines()[d.span.line - 1], d


def test_explanation_names_the_nodes_that_did_not_join():
    p = plan_of("join_timeout = 10 s")
    eng = ENGINES["torchrun"]
    log = "Traceback ...\ntorch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"
    values = {FREE_PORT: "40001"}
    assert eng.explain_failure(p, log, {"node0": True, "node1": False}, values) == (
        "rendezvous tr2-two at 127.0.0.1:40001 timed out after 10 s: node(s) 1 never joined")
    assert "not every node joined" in eng.explain_failure(p, log, {"node0": True, "node1": True}, values)
    assert eng.explain_failure(p, "exit code 1: some other error", {"node0": True}, values) is None


def test_only_names_launches_of_the_plan(runs):
    with pytest.raises(ValueError, match="no launch named node7"):
        api.launch(plan_of(), source_text=None, spec_json=None, only=["node7"])
    assert not runs.exists() or list(runs.iterdir()) == []


# ------------------------------------------------------------------------------- slow: real agents


@pytest.mark.slow
def test_two_agents_on_loopback_train_together(runs):
    p = plan_of("join_timeout = 60 s")
    t0 = time.monotonic()
    handle = api.launch(p, source_text=None, spec_json=None)
    result = handle.wait(300)
    wall = time.monotonic() - t0
    assert result.status == "ok", (result.summary.get("failure"), (result.run_dir / "worker.log").read_text()[-3000:])
    assert result.returncodes == (0, 0)
    port = handle.values[FREE_PORT]
    assert [ln["argv"][7] for ln in result.summary["launches"]] == [f"--rdzv-endpoint=127.0.0.1:{port}"] * 2
    for rank in (0, 1):
        evs = read_events(result.run_dir / f"rank{rank}.jsonl")
        (started,) = [e for e in evs if isinstance(e, RunStarted)]
        assert started.rank == rank and started.world_size == 2
        steps = [e for e in evs if isinstance(e, StepMetrics)]
        assert len(steps) == 4 and all(math.isfinite(e.loss) for e in steps)
    assert set(result.summary["stats"]["per_rank"]) == {"0", "1"}
    assert all(not procgroup.members(pid) and not procgroup.group_alive(pid) for pid in handle.pids), "a process was left behind"
    print(f"two torchrun agents on loopback: wall {wall:.1f} s")


@pytest.mark.slow
def test_a_node_that_never_joins_ends_the_run_within_the_timeout(runs):
    p = plan_of("join_timeout = 10 s")
    t0 = time.monotonic()
    handle = api.launch(p, source_text=None, spec_json=None, only=["node0"])  # node 1 never starts
    result = handle.wait(120)
    wall = time.monotonic() - t0
    assert result.status == "failed" and result.returncodes == (1, None)
    msg = result.summary["failure"]["message"]
    port = handle.values[FREE_PORT]
    assert msg.startswith(f"rendezvous tr2-two at 127.0.0.1:{port} timed out after 10 s: node(s) 1 never joined"), msg
    assert 10 <= wall < 10 + 20, wall  # the agent's import time (~5 s here) plus the timeout
    assert result.summary["launches"][1]["pid"] is None
    assert not procgroup.members(handle.pids[0]) and not procgroup.group_alive(handle.pids[0]), "a process was left behind"
    print(f"missing node: failed after {wall:.1f} s")


def test_cli_run_refuses_an_unknown_launch(tmp_path, runs, capsys):
    from accelctl.cli import main

    wl = tmp_path / "tr2.wl"
    wl.write_text(TEMPLATE.replace("BLOCK", ""))
    assert main(["run", str(wl), "-t", "two", "--headless", "--launch", "node9"]) == 2
    assert "target two has no launch node9 (launches: node0, node1)" in capsys.readouterr().err
    assert not runs.exists() or list(runs.iterdir()) == []

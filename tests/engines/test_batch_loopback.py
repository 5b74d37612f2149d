"""The AWS Batch container entrypoint for real: two "nodes" on loopback (slow).

Each node is ``python -m accelctl.engines.batch_entrypoint`` started with exactly the
command and environment of the rendered job definition, plus the ``AWS_BATCH_JOB_*``
variables AWS Batch sets (its own ``AWS_BATCH_JOB_NODE_INDEX``; the child gets the main
node's address).  Node 1 connects from 127.0.0.2, so the main node learns a second host
from the connection as it would learn a private IP, writes the hostfile, and both start
DeepSpeed's per-node launch (``--no_ssh --node_rank``) that train together over gloo.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelctl.api import plan, validate_text
from accelctl.contract.events import RunStarted, StepMetrics, read_events
from accelctl.run import procgroup

REPO = Path(__file__).resolve().parents[2]

TWO_NODES = """
workload tiny_batch {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  batch { micro = 4  accumulation = 1 }
  optimizer adamw { lr = 0.001 }
  measure { warmup = 1  steps = 4 }
  engine deepspeed { master_port = PORT }
  engine aws_batch { job_queue = "q"  image = "img"  vcpus = 2  memory = 4 GB }
  target two { device = cpu  devices = 1  nodes = 2  threads = 1  precision = fp32
               parallel = zero(stage = 1)  engine = aws_batch }
}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def container_of(text: str, target: str) -> dict:
    specs, diags = validate_text(text)
    assert not diags, diags
    p = plan(specs[0], target)
    files = {f.path: f.content for f in p.files}
    return json.loads(files["batch_job_definition.json"])["nodeProperties"]["nodeRangeProperties"][0]["container"]


@pytest.mark.slow
def test_two_nodes_on_loopback_train_together(tmp_path):
    container = container_of(TWO_NODES.replace("PORT", str(free_port())), "two")
    assert container["command"][0] == "python"
    argv = [sys.executable, *container["command"][1:]]
    base = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_BATCH")},
            **{e["name"]: e["value"] for e in container["environment"]},
            "PYTHONPATH": str(REPO), "AWS_BATCH_JOB_NUM_NODES": "2", "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
            "ACCELCTL_BATCH_COORD_PORT": str(free_port()), "ACCELCTL_BATCH_JOIN_TIMEOUT": "120",
            "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    nodes = {
        0: {"AWS_BATCH_JOB_NODE_INDEX": "0"},
        1: {"AWS_BATCH_JOB_NODE_INDEX": "1", "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "127.0.0.1",
            "ACCELCTL_BATCH_NODE_ADDRESS": "127.0.0.2"},
    }
    t0 = time.monotonic()
    procs = {}
    for i, extra in nodes.items():
        log = open(tmp_path / f"node{i}.log", "wb")  # noqa: SIM115
        procs[i] = subprocess.Popen(argv, env={**base, **extra, "ACCELCTL_RUN_DIR": str(tmp_path / f"node{i}")},
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path)
    try:
        rcs = {i: p.wait(timeout=300) for i, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, 9)
    wall = time.monotonic() - t0
    logs = {i: (tmp_path / f"node{i}.log").read_text(errors="replace") for i in procs}
    assert rcs == {0: 0, 1: 0}, {i: logs[i][-3000:] for i in logs}
    # the main node wrote the hostfile from what the nodes reported; both nodes got the same one
    for i in nodes:
        assert (tmp_path / f"node{i}" / "hostfile").read_text() == "127.0.0.1 slots=1\n127.0.0.2 slots=1\n"
    assert "rank 1, hosts ['127.0.0.1', '127.0.0.2']" in logs[1]
    events = {i: read_events(tmp_path / f"node{i}" / f"rank{i}.jsonl") for i in nodes}
    for rank, evs in events.items():
        started = [e for e in evs if isinstance(e, RunStarted)]
        assert len(started) == 1 and started[0].rank == rank and started[0].world_size == 2
        steps = [e for e in evs if isinstance(e, StepMetrics)]
        assert [e.step for e in steps] == list(range(1, len(steps) + 1)) and len(steps) == 5, steps
        assert all(math.isfinite(e.loss) for e in steps)
    # data parallel: both ranks report the same global loss at every step
    assert [round(e.loss, 5) for e in events[0] if isinstance(e, StepMetrics)] == \
        [round(e.loss, 5) for e in events[1] if isinstance(e, StepMetrics)]
    assert not procgroup.members(procs[0].pid) and not procgroup.members(procs[1].pid), "a process was left behind"
    print(f"two-node loopback wall {wall:.1f} s")

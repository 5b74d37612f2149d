"""The aws_batch engine at plan time: seed 001's targets plan, botocore's own Batch service
model accepts the requests (and rejects a broken one with its message), refusals are
positioned, and the entrypoint validates what it reads from the environment."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from accelctl.api import check_plan, load, plan, validate_text
from accelctl.engines import batch_entrypoint as ep
from accelctl.errors import PlanError

REPO = Path(__file__).resolve().parents[2]
SEED_001 = [("bert_1_5b_zero1.wl", "bert_1_5b_zero1_8n", "dl1_1n"), ("bert_1_5b_zero1.wl", "bert_1_5b_zero1_8n", "dl1_8n"),
            ("bert_1_5b_zero1.wl", "bert_1_5b_zero1_16n", "dl1_16n"),
            *[("bert_large_scaling.wl", "bert_large_scaling", f"dl1_{n}n") for n in (1, 2, 4, 8)]]


def seed_plan(wl, workload, target):
    spec = next(s for s in load(REPO / "workloads" / wl) if s.name == workload)
    return spec, plan(spec, target)


def requests(p):
    files = {f.path: f.content for f in p.files}
    return json.loads(files["batch_job_definition.json"]), json.loads(files["batch_submit_job.json"])


@pytest.mark.parametrize("wl,workload,target", SEED_001)
def test_seed_001_targets_plan_and_botocore_accepts_both_requests(wl, workload, target):
    pytest.importorskip("botocore")
    spec, p = seed_plan(wl, workload, target)
    assert p.engine == "aws_batch" and p.backend == "deepspeed"
    definition, submit = requests(p)
    nodes = int(target.split("_")[1][:-1])
    props = definition["nodeProperties"]
    assert definition["type"] == "multinode" and props["numNodes"] == nodes and props["mainNode"] == 0
    container = props["nodeRangeProperties"][0]["container"]
    assert container["instanceType"] == "dl1.24xlarge" and container["command"][:3] == ["python", "-m",
                                                                                    "accelctl.engines.batch_entrypoint"]
    devices = [d["hostPath"] for d in container["linuxParameters"]["devices"]]
    assert [d for d in devices if "uverbs" in d] == [f"/dev/infiniband/uverbs{i}" for i in range(4)]
    assert len([d for d in devices if d.startswith("/dev/accel/accel")]) == 16
    assert submit["jobQueue"] == "dl1-multinode-queue"
    assert [launch.name for launch in p.launches] == ["submit"]
    results = check_plan(p, spec)
    assert [r.ok for r in results] == [True, True, True], [r.render() for r in results]


def test_a_broken_job_definition_is_rejected_with_botocores_message():
    botocore = pytest.importorskip("botocore.session")
    from accelctl.engines.aws_batch import validate_request

    _, p = seed_plan("bert_large_scaling.wl", "bert_large_scaling", "dl1_2n")
    definition, _ = requests(p)
    model = botocore.get_session().get_service_model("batch")
    assert validate_request(model, "RegisterJobDefinition", definition) == ""
    del definition["nodeProperties"]["mainNode"]
    definition["nodeProperties"]["numNodes"] = "2"
    report = validate_request(model, "RegisterJobDefinition", definition)
    assert 'Missing required parameter in nodeProperties: "mainNode"' in report
    assert "Invalid type for parameter nodeProperties.numNodes" in report


def test_the_deepspeed_check_reads_each_nodes_launch():
    from accelctl.plan.registry import ENGINES

    _, p = seed_plan("bert_large_scaling.wl", "bert_large_scaling", "dl1_4n")
    node = ENGINES["aws_batch"].node_plan(p)
    assert [ln.name for ln in node.launches] == ["node0", "node1", "node2", "node3"]
    assert node.launches[2].argv[:6] == ("deepspeed", "--master_addr", "node0", "--no_ssh", "--node_rank", "2")


TEMPLATE = """
workload w {
  task pretrain
  model bert(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  engine aws_batch { BLOCK }
  target t { device = cpu  devices = 1  nodes = 2  parallel = zero(stage = 1)  engine = aws_batch }
}
"""


@pytest.mark.parametrize("block,code,line_has", [
    ('image = "i"', "E546", "target t"),                          # no job_queue
    ('job_queue = "q"  image = "i"', "E546", "target t"),         # a cpu target has no instance to size
    ('job_queue = "q"  image = "i"  vcpus = 2  memory = 4 GB  efa = on', "E546", "efa = on"),
])
def test_refusals_are_positioned(block, code, line_has):
    text = TEMPLATE.replace("BLOCK", block)
    specs, diags = validate_text(text)
    with pytest.raises(PlanError) as e:
        plan(specs[0], "t")
    d = e.value.diagnostics[0]
    # valid: validate reports plan's refusal as a warning at the same line, same code and words (issue 23)
    assert [(x.code, x.message, x.span, x.severity) for x in diags] == [(d.code, d.message, d.span, "warning")]
    assert d.code == code and d.span is not None and line_has in text.splitlines()[d.span.line - 1], d


def test_workload_strings_never_reach_a_shell():
    """A queue or image with shell syntax is refused where it is written (E216); what passes
    stays a JSON string, and the one launch is an argv list."""
    nasty = 'job_queue = "q; rm -rf /"  image = "$(touch /tmp/x)"  vcpus = 2  memory = 4 GB'
    text = TEMPLATE.replace("BLOCK", nasty)
    _, diags = validate_text(text)
    assert [d.code for d in diags] == ["E216", "E216"]
    assert [text.splitlines()[d.span.line - 1][d.span.column - 1:][:3] for d in diags] == ['"q;', '"$(']
    ok = 'job_queue = "arn:aws:batch:us-east-1:123456789012:job-queue/q-1"  image = "reg:5000/a/b@sha256:00"'
    specs, _ = validate_text(TEMPLATE.replace("BLOCK", ok + "  vcpus = 2  memory = 4 GB"))
    p = plan(specs[0], "t")
    definition, submit = requests(p)
    assert submit["jobQueue"] == "arn:aws:batch:us-east-1:123456789012:job-queue/q-1"
    container = definition["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert container["image"] == "reg:5000/a/b@sha256:00" and container["command"] == [
        "python", "-m", "accelctl.engines.batch_entrypoint"]
    assert not any("sh" == a or a.endswith("/sh") or a == "-c" for a in container["command"])
    (launch,) = p.launches
    assert shlex.split(launch.shell()) == list(launch.argv)
    assert all("rm -rf" not in a and "$(" not in a for a in launch.argv)


def test_the_entrypoint_validates_its_environment():
    with pytest.raises(ep.NodeError, match="AWS_BATCH_JOB_NODE_INDEX='1; id'"):
        ep.run_node({"AWS_BATCH_JOB_NODE_INDEX": "1; id", "AWS_BATCH_JOB_NUM_NODES": "2"})
    with pytest.raises(ep.NodeError, match="out of range"):
        ep.run_node({"AWS_BATCH_JOB_NODE_INDEX": "2", "AWS_BATCH_JOB_NUM_NODES": "2"})
    with pytest.raises(ep.NodeError, match="not an IP address"):
        ep.env_ip({"X": "main-node; id"}, "X")
    with pytest.raises(ep.NodeError, match="ACCELCTL_BATCH_NODE is missing"):
        ep.run_node({"AWS_BATCH_JOB_NODE_INDEX": "0", "AWS_BATCH_JOB_NUM_NODES": "1"})


def test_the_entrypoint_refuses_files_outside_the_run_folder(tmp_path):
    with pytest.raises(ep.NodeError, match="outside the run folder"):
        ep.unpack({"files": {"../evil": "x"}, "job": {}}, tmp_path)


def test_a_missing_node_is_named_when_the_main_node_times_out():
    with pytest.raises(ep.NodeError, match=r"node\(s\) \[1, 2\] did not report"):
        ep.gather(0, 3, _free_port(), timeout=0.5)


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_node_argv_replaces_the_master_address():
    argv = ["deepspeed", "--hostfile", "h", "--master_addr", "x", "--module", "m"]
    assert ep.node_argv(argv, master="10.0.0.1", rank=3) == [
        "deepspeed", "--master_addr", "10.0.0.1", "--no_ssh", "--node_rank", "3", "--hostfile", "h", "--module", "m"]

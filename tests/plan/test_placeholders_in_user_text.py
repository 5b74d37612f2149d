"""Placeholders are filled only where the plan put them, never inside workload text (issue 22 #7).

``prompt = "Explain {run_dir} and port {free_port}"`` became ``Explain <runs>/<id> and port
{free_port}`` in the runner's job.json and ``Explain <plan-dir>/run and port 40404`` in ``plan -f
sh``'s.  The job is data now (no filler reads it, nor a generated file whose ``template`` is
off), the fillers work in one pass, and
workload text that would land in a template (a vendor script's argv, a hostfile path, a volume
path) is refused at its line.  Every placeholder name is tried, alone and together.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import plan, render_plan_sh, validate_text
from accelctl.contract.placeholders import FREE_PORT, OPTIMUM_HABANA, PLACEHOLDERS, RUN_DIR, fill
from accelctl.contract.plan import GeneratedFile, Plan
from accelctl.engines.aws_batch import JOB_DEFINITION_FILE
from accelctl.engines.batch_entrypoint import NODE_ENV, unpack
from accelctl.errors import PlanError
from accelctl.run import store
from accelctl.run.supervision import commands, runner
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

TEXTS = [*PLACEHOLDERS, "Explain {run_dir} and port {free_port}", "in {optimum_habana}/x", "{{run_dir}}",
         "{run_dir", "run_dir}", "{ run_dir }", "{RUN_DIR}", "$run_dir ${run_dir} '{run_dir}' \"{free_port}\"",
         "{free_port}{run_dir}{optimum_habana}", "\\u007brun_dir}", "a\nb {run_dir}\tc"]


def generate(prompt: str) -> str:
    text = json.dumps(prompt)  # its escapes (\\n, \\t, \\\\, \\") are the language's
    return ("workload g {\n  task generate {\n    prompt = " + text + "\n    max_new_tokens = 3 tokens\n"
            "    batch_size = 1\n  }\n"
            "  model gpt2(layers = 1, hidden = 32, heads = 2, vocab = 300, max_positions = 512)\n"
            "  precision fp32\n  measure { warmup = 1 step  steps = 2 steps }\n  target cpu { threads = 1 }\n}\n")


def _plan(prompt: str) -> Plan:
    specs, diags = validate_text(generate(prompt), "g.wl")
    assert not [d for d in diags if d.severity == "error"], diags
    return plan(specs[0], "cpu")


@pytest.mark.parametrize("text", TEXTS, ids=ascii)
def test_the_job_is_data_no_filler_finds_a_placeholder_in_it(text, tmp_path):
    p = _plan(text)
    assert json.loads(p.job.to_json())["task"]["prompt"] == text
    assert p.job.to_json() == json.dumps(p.job.to_dict(), indent=2, sort_keys=True)  # no brace escaped
    # the run store writes the job as data
    job = store.write_inputs(tmp_path, p, source_text=None, spec_json=None, run_values={FREE_PORT: "4242"})
    assert job.task.prompt == text
    assert json.loads((tmp_path / "job.json").read_text())["task"]["prompt"] == text


@pytest.mark.parametrize("text", TEXTS, ids=ascii)
def test_plan_sh_writes_the_prompt_as_written(text, tmp_path):
    script = tmp_path / "plan.sh"
    script.write_text(render_plan_sh(_plan(text)))
    rd = tmp_path / "run"
    # accelctl not on the path: the script writes its files, then its launch fails (set -e)
    subprocess.run(["sh", str(script)], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(rd),
                                                          "FREE_PORT": "4242"}, capture_output=True, timeout=60)
    assert json.loads((rd / "job.json").read_text())["task"]["prompt"] == text


@pytest.mark.slow
def test_the_worker_of_plan_sh_and_of_the_runner_read_the_prompt_as_written(tmp_path):
    """Real runs: the script of ``plan -f sh`` under sh (events on stdout), and ``accelctl
    run``'s runner; the worker's ``run_started`` names the prompt it read."""
    text = "Explain {run_dir} and port {free_port} in {optimum_habana}"
    p = _plan(text)
    script = tmp_path / "plan.sh"
    script.write_text(render_plan_sh(p))
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "RUN_DIR": str(tmp_path / "sh"), "PYTHONPATH": str(ROOT),
           "HOME": str(tmp_path)}
    r = subprocess.run(["sh", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    started = [json.loads(ln) for ln in r.stdout.splitlines() if '"run_started"' in ln]
    assert started and started[0]["details"]["prompt"] == text, r.stdout[-2000:]

    handle = runner.launch(p, source_text=generate(text), spec_json={"name": "g"}, runs_root=tmp_path / "runs")
    result = handle.wait(timeout=300)
    assert result.ok, result.summary.get("failure")
    assert json.loads((result.run_dir / "job.json").read_text())["task"]["prompt"] == text
    events = [json.loads(ln) for ln in (result.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["details"]["prompt"] for e in events if e.get("kind") == "run_started"] == [text]


def test_fillers_work_in_one_pass():
    """A value holding a placeholder's name is not filled again (a run folder under
    ``/tmp/{free_port}/``), and what is not a placeholder stays."""
    subs = {RUN_DIR: "/tmp/{free_port}/run", FREE_PORT: "4242", OPTIMUM_HABANA: "/oh"}
    assert commands.fill("{run_dir}/job.json:{free_port}", subs) == "/tmp/{free_port}/run/job.json:4242"
    assert fill("{{run_dir}} {run_dir {x}", subs) == "{/tmp/{free_port}/run} {run_dir {x}"
    with pytest.raises(commands.UnresolvedPlaceholder):
        commands.fill("{free_port}", {FREE_PORT: None})
    assert commands.fill("no placeholder", {FREE_PORT: None}) == "no placeholder"


@pytest.mark.parametrize("text", TEXTS, ids=ascii)
def test_a_data_file_is_written_as_planned_and_a_template_is_filled(text, tmp_path):
    """The run store and ``plan -f sh`` fill a generated file's placeholders only where it is a
    template; a data file (``template=False``) holding the same text is written byte for byte."""
    doc = json.dumps({"a": [text, {"b": text}], text: 1}, sort_keys=True) + "\n"
    files = (GeneratedFile("data.json", doc, template=False), GeneratedFile("conf", "at {run_dir}/x\n"))
    store.write_generated_files(tmp_path / "store", files, {FREE_PORT: "4242"})
    assert (tmp_path / "store" / "data.json").read_text() == doc
    assert (tmp_path / "store" / "conf").read_text() == f"at {tmp_path / 'store'}/x\n"
    plan_sh = replace(_plan("x"), files=files)
    script = tmp_path / "plan.sh"
    script.write_text(render_plan_sh(plan_sh))
    rd = tmp_path / "run"
    subprocess.run(["sh", str(script)], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(rd),
                                                          "FREE_PORT": "4242"}, capture_output=True, timeout=60)
    assert (rd / "data.json").read_text() == doc
    assert (rd / "conf").read_text() == f"at {rd}/x\n"


CHECKPOINTED = (ROOT / "workloads" / "bert_1_5b_zero1.wl").read_text().replace(
    "  measure { warmup = 3 steps  steps = 10 steps }",
    '  measure { warmup = 3 steps  steps = 10 steps }\n  checkpoint { every = 5 steps  dir = "ck/{run_dir}-{free_port}" }',
    1)


def test_aws_batch_carries_the_job_as_data_to_the_node(tmp_path):
    """The job rides in the job definition (a data file: written as it is submitted) and the
    entrypoint writes it on the node: the workload's text arrives as written, while the plan's
    own {run_dir} in the node's launch and files is filled there."""
    specs, diags = validate_text(CHECKPOINTED, str(tmp_path / "w.wl"))
    assert not [d for d in diags if d.severity == "error"], diags
    p = plan(specs[0], "dl1_8n")
    want = p.job.checkpoint.dir
    assert want.endswith("ck/{run_dir}-{free_port}")
    store.write_generated_files(tmp_path, p.files, {FREE_PORT: "4242"})
    definition = json.loads((tmp_path / JOB_DEFINITION_FILE).read_text())
    assert definition == p.request["definition"]
    env = definition["nodeProperties"]["nodeRangeProperties"][0]["container"]["environment"]
    node = json.loads(next(e["value"] for e in env if e["name"] == NODE_ENV))
    assert node["job"]["checkpoint"]["dir"] == want
    rd = tmp_path / "node"
    rd.mkdir()
    unpack(node, rd)
    assert json.loads((rd / "job.json").read_text())["checkpoint"]["dir"] == want
    for name in node["files"]:
        assert RUN_DIR not in (rd / name).read_text()


def test_an_example_scripts_argument_with_a_placeholder_is_refused_at_its_line():
    text = (ROOT / "workloads" / "bloomz.wl").read_text().replace(
        'prompt         = "DeepSpeed is a machine learning framework"', 'prompt = "Explain {free_port}"', 1)
    specs, diags = validate_text(text, "bloomz.wl")
    assert not [d for d in diags if d.severity == "error"]
    with pytest.raises(PlanError) as exc:
        plan(specs[0], "gaudi2_example")
    lines = {d.span.line for d in exc.value.diagnostics}
    prompt_line = 1 + next(i for i, ln in enumerate(text.splitlines()) if 'prompt = "Explain {free_port}"' in ln)
    assert prompt_line in lines and any("{free_port}" in d.hint for d in exc.value.diagnostics)
    assert plan(specs[0], "cpu").job.task.prompt == "Explain {free_port}"  # the worker takes it as data


@pytest.mark.parametrize("engine_body,key,code", [
    ('hostfile = "/etc/{run_dir}/hosts"', "hostfile", "E545"),
])
def test_a_launch_word_from_workload_text_with_a_placeholder_is_refused(engine_body, key, code):
    text = ("workload w {\n  task pretrain { objective = mlm }\n  model bert(layers = 1, hidden = 32, heads = 2)\n"
            f"  engine deepspeed {{ {engine_body} }}\n"
            "  target t { device = a100  devices = 2  nodes = 2  parallel = zero(stage = 2) }\n}\n")
    specs, diags = validate_text(text, "w.wl")
    assert not [d for d in diags if d.severity == "error"], diags
    with pytest.raises(PlanError) as exc:
        plan(specs[0], "t")
    assert [(d.code, d.span.line) for d in exc.value.diagnostics] == [(code, 4)]


def test_a_kubernetes_volume_path_with_a_placeholder_is_refused():
    text = ("workload w {\n  task pretrain { objective = mlm }\n  model bert(layers = 1, hidden = 32, heads = 2)\n"
            '  engine kubernetes { image = "reg/img:1"  volume_claim = "runs"  volume_path = "/shared/{run_dir}" }\n'
            "  target t { device = a100  devices = 2  nodes = 2  parallel = ddp  engine = kubernetes }\n}\n")
    specs, diags = validate_text(text, "w.wl")
    assert not [d for d in diags if d.severity == "error"], diags
    with pytest.raises(PlanError) as exc:
        plan(specs[0], "t")
    assert [(d.code, d.span.line) for d in exc.value.diagnostics] == [("E549", 4)]
    assert "placeholder" in exc.value.diagnostics[0].hint

"""The slurm engine: the batch script it renders (fast), and real jobs on a local two-node
Slurm cluster (slow; ``slurm_cluster`` in conftest.py starts munged, slurmctld and two slurmd)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from accelctl.api import launch, plan, validate_text
from accelctl.contract.events import RunStarted, StepMetrics, read_events
from accelctl.engines.slurm import SCRIPT
from accelctl.errors import PlanError

TEMPLATE = """
workload tiny_slurm {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  batch { micro = 4  accumulation = 1 }
  optimizer adamw { lr = 0.001 }
  measure { warmup = 1  steps = STEPS }
  engine slurm { BLOCK }
  target t { device = cpu  devices = 1  nodes = 2  threads = 1  precision = fp32  engine = slurm }
  target g { device = h100  devices = 4  nodes = 2  engine = slurm }
}
"""


def make_plan(block: str = "", target: str = "t", steps: int = 4):
    specs, diags = validate_text(TEMPLATE.replace("BLOCK", block).replace("STEPS", str(steps)))
    assert not diags, diags
    return specs[0], plan(specs[0], target)


def script_of(p) -> str:
    return next(f.content for f in p.files if f.path == SCRIPT)


def test_the_script_asks_for_what_the_target_and_block_say():
    _, p = make_plan('partition = "debug"  account = "proj-1"  qos = "high"  constraint = "a100&ib"  '
                     "time_limit = 90 min  mem = 2 GB  cpus_per_task = 8", target="g")
    s = script_of(p)
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=8",
                 "#SBATCH --gres=gpu:4", "#SBATCH --time=0-01:30:00", "#SBATCH --partition=debug",
                 "#SBATCH --account=proj-1", "#SBATCH --qos=high", "#SBATCH --constraint=a100&ib",
                 "#SBATCH --mem=1908M", "#SBATCH --output=slurm-%j.out"):
        assert line in s.splitlines(), line
    assert '--rdzv_endpoint="$addr:$port" --rdzv_id="$SLURM_JOB_ID"' in s
    assert "--node_rank=\"$SLURM_NODEID\"" in s and "--nproc_per_node=4" in s
    (submit,) = p.launches
    assert submit.argv == ("sbatch", "--parsable", SCRIPT) and submit.cwd == "{run_dir}"
    assert p.request["script"] == SCRIPT


def test_a_cpu_target_asks_for_no_gpu():
    _, p = make_plan()
    assert "--gres" not in script_of(p) and "#SBATCH --nodes=2" in script_of(p)


@pytest.mark.parametrize("block,line_has,code", [
    ('partition = "debug; rm -rf /"', "partition", "E216"),   # refused by the check, where written
    ('account = "$(touch /tmp/x)"', "account", "E216"),
    ('qos = "a b"', "qos", "E216"),
    ('gres = "gpu:1\\n#SBATCH --x"', "gres", "E216"),
    ('container_image = "img"', "container_image", "E547"),  # valid, but not supported by the engine
])
def test_settings_that_cannot_reach_the_script_are_refused_where_written(block, line_has, code):
    text = TEMPLATE.replace("BLOCK", block).replace("STEPS", "4")
    specs, diags = validate_text(text)
    if code == "E547":  # valid: validate reports plan's refusal as a warning, same code and line (issue 23)
        assert {(d.code, d.severity) for d in diags} == {("E547", "warning")}, diags
        with pytest.raises(PlanError) as e:
            plan(specs[0], "t")
        assert (e.value.diagnostics[0].message, e.value.diagnostics[0].span) == (diags[0].message, diags[0].span)
        diags = e.value.diagnostics
    d = diags[0]
    assert d.code == code and d.span is not None and line_has in text.splitlines()[d.span.line - 1], d


def test_every_workload_word_is_quoted():
    """The backend's words reach the script through shlex.quote: a word with shell syntax
    (here an environment value) comes back as one literal word."""
    from accelctl.contract.plan import Launch
    from accelctl.engines.slurm import render_script

    spec, _ = make_plan()
    nasty = Launch("torchrun", ("torchrun", "--nproc_per_node=1", "-m", "accelctl.worker", "{run_dir}/a b;$(x).json"),
                   {"EVIL": "$(touch /tmp/pwned); `id`"})
    s = render_script(spec, spec.targets[0], nasty, {})
    assert "export EVIL='$(touch /tmp/pwned); `id`'" in s
    assert "\"$SLURM_SUBMIT_DIR\"'/a b;$(x).json'" in s


# -- real jobs ---------------------------------------------------------------------------------


def _processes_of(run_dir: Path) -> list[int]:
    """Processes whose command line names the run folder (the workers' job.json, the submitter)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if str(run_dir) in (d / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


@pytest.mark.slow
def test_two_nodes_train_together_under_slurm(slurm_cluster, tmp_path):
    _, p = make_plan('partition = "debug"  time_limit = 10 min', steps=6)
    t0 = time.monotonic()
    handle = launch(p, source_text=None, spec_json=None, runs_root=tmp_path)
    first_step = None
    for ev in handle.events():
        if isinstance(ev, StepMetrics) and first_step is None:
            first_step = time.monotonic() - t0
    result = handle.wait(timeout=300)
    wall = time.monotonic() - t0
    log = (handle.run_dir / "worker.log").read_text(errors="replace")
    assert result.status == "ok", (result.summary, log)
    job_id = (handle.run_dir / "slurm_job_id").read_text().strip()
    info = slurm_cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    assert "JobState=COMPLETED" in info and "NumNodes=2" in info and "ExitCode=0:0" in info, info
    events = list(read_events(handle.run_dir / "events.jsonl"))
    ranks = {e.rank for e in events if isinstance(e, StepMetrics)}
    assert ranks == {0, 1}, ranks
    started = [e for e in events if isinstance(e, RunStarted)]
    assert started and started[0].world_size == 2
    out = (handle.run_dir / f"slurm-{job_id}.out").read_text(errors="replace")
    assert re.search(r"rendezvous 127\.0\.0\.1:\d+", out), out
    print(f"\nslurm 2x1 DDP: submit -> first step {first_step:.1f} s, whole run {wall:.1f} s")
    (tmp_path / "timing.json").write_text(json.dumps({"first_step_s": first_step, "wall_s": wall}))


@pytest.mark.slow
def test_stopping_the_run_cancels_the_job_and_leaves_nothing(slurm_cluster, tmp_path):
    _, p = make_plan('partition = "debug"', steps=100000)
    handle = launch(p, source_text=None, spec_json=None, runs_root=tmp_path)
    for ev in handle.events():
        if isinstance(ev, StepMetrics):
            break
    job_id = (handle.run_dir / "slurm_job_id").read_text().strip()
    assert slurm_cluster.run("squeue", "-h", "-j", job_id).stdout.strip(), "the job should be running"
    t0 = time.monotonic()
    handle.stop()
    result = handle.wait(timeout=120)
    stopped = time.monotonic() - t0
    assert result.status != "ok"
    assert slurm_cluster.run("squeue", "-h", "-j", job_id).stdout.strip() == ""
    state = slurm_cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    assert "JobState=CANCELLED" in state, state
    summary = json.loads((handle.run_dir / "summary.json").read_text())
    assert summary["scheduler"]["job_id"] == job_id and summary["scheduler"]["state"] == "CANCELLED", summary
    deadline = time.monotonic() + 10
    while _processes_of(handle.run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_of(handle.run_dir) == []
    print(f"\nslurm cancel: stop -> job gone and runner done in {stopped:.1f} s")


def test_the_check_is_not_run_without_a_controller(monkeypatch, tmp_path):
    """No slurm.conf to reach a controller (or no sbatch): reported as not run, never a pass."""
    from accelctl.api import check_plan

    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "missing.conf"))
    spec, p = make_plan('partition = "debug"')
    results = {r.tool: r for r in check_plan(p, spec)}
    assert results["torchrun parser (node0)"].ok is True
    sbatch = results["sbatch --test-only (Slurm controller)"]
    assert sbatch.ok is None, sbatch


@pytest.mark.slow
def test_the_controller_checks_the_script(slurm_cluster):
    from accelctl.api import check_plan

    spec, p = make_plan('partition = "debug"  time_limit = 5 min')
    (ok,) = [r for r in check_plan(p, spec) if r.tool.startswith("sbatch")]
    assert ok.ok is True and any("to start at" in m for m in ok.messages), ok
    spec, p = make_plan('partition = "nosuch"')
    (bad,) = [r for r in check_plan(p, spec) if r.tool.startswith("sbatch")]
    assert bad.ok is False and any("partition" in m.lower() for m in bad.messages), bad
    assert slurm_cluster.queue() == ""

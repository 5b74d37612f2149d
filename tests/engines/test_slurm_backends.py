"""DeepSpeed and Gaudi under the slurm engine: the batch scripts it renders, read back by the
backends' own checks (fast), and a real 2-node DeepSpeed ZeRO run on the local two-node Slurm
cluster (slow; ``slurm_cluster`` in conftest.py)."""

from __future__ import annotations

import shlex
import time

import pytest

from accelctl.api import launch, plan, validate_text
from accelctl.contract.events import RunStarted, StepMetrics, read_events
from accelctl.engines.slurm import SCRIPT, SlurmEngine
from accelctl.run.store import read_run
from accelctl.frozen import replace

TEMPLATE = """
workload tiny_ds_slurm {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  batch { micro = 4  accumulation = 1 }
  optimizer adamw { lr = 0.001 }
  measure { warmup = 1  steps = STEPS }
  engine slurm { partition = "debug"  time_limit = 10 min }
  target z { device = cpu  devices = 1  nodes = 2  threads = 1  precision = fp32  parallel = zero(stage = 1)
             engine = slurm }
  target g { device = h100  devices = 4  nodes = 2  precision = bf16  parallel = zero(stage = 2)  engine = slurm }
  target hpu1 { device = gaudi2  devices = 8  precision = bf16  parallel = data  engine = slurm }
  target hpu2 { device = gaudi2  devices = 8  nodes = 2  precision = bf16  parallel = data  engine = slurm }
  target hpuz { device = gaudi2  devices = 8  nodes = 2  precision = bf16  parallel = zero(stage = 1)  engine = slurm }
}
"""


def make_plan(target: str = "z", steps: int = 4):
    specs, diags = validate_text(TEMPLATE.replace("STEPS", str(steps)))
    assert [(d.code, d.severity) for d in diags] == [("E520", "warning")], diags  # hpu2 (multi-node Gaudi), warned
    return specs[0], plan(specs[0], target)


def script_of(p) -> str:
    return next(f.content for f in p.files if f.path == SCRIPT)


def test_one_deepspeed_launcher_per_node_from_the_allocation():
    _, p = make_plan("g")
    assert p.backend == "deepspeed" and p.engine == "slurm"
    s = script_of(p)
    assert "#SBATCH --nodes=2" in s and "#SBATCH --gres=gpu:4" in s
    # the hostfile comes from the allocation, not from the backend's placeholder hosts
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/\\$/ slots=4/" > "$SLURM_SUBMIT_DIR/hostfile"' in s
    assert {f.path for f in p.files} >= {"ds_config.json", SCRIPT}
    assert not {"hostfile", "deepspeed_env"} & {f.path for f in p.files}
    assert not any("placeholder hosts" in w for w in p.warnings), p.warnings
    assert "DS_ENV_FILE" not in s
    assert '-m deepspeed.launcher.runner --node_rank="$SLURM_NODEID"' in s
    assert '--no_ssh --master_addr="$addr" --master_port="$port"' in s
    tail = shlex.split(s.rstrip().splitlines()[-1])
    assert tail == ["--num_gpus", "4", "--module", "--no_local_rank", "accelctl.worker",
                    "$SLURM_SUBMIT_DIR/job.json"], tail


def test_deepspeed_host_settings_are_said_not_to_apply_under_slurm():
    text = TEMPLATE.replace("STEPS", "4").replace("  engine slurm {", '  engine deepspeed { hosts = ["a", "b"]  master_port = 29600 }\n  engine slurm {')
    specs, diags = validate_text(text)
    assert [(d.code, d.severity) for d in diags] == [("E520", "warning")], diags  # hpu2 (multi-node Gaudi), warned
    p = plan(specs[0], "z")
    assert any(w.startswith("engine deepspeed hosts, master_port do(es) not apply under engine slurm") for w in p.warnings), p.warnings
    s = script_of(p)
    assert "29600" not in s and '--master_port="$port"' in s and "hostfile" not in {f.path for f in p.files}


def test_the_node_plan_is_what_deepspeeds_own_parser_accepts():
    """The script read back into node 0's ``deepspeed`` command, checked by DeepSpeed's
    launcher parser, fetch_hostfile and resource resolution (accelctl.backends.deepspeed.check)."""
    from accelctl.backends.deepspeed.check import check_launch

    spec, p = make_plan("z")
    node = SlurmEngine().node_plan(p)
    (ln,) = node.launches
    assert ln.argv[:12] == ("deepspeed", "--hostfile", "{run_dir}/hostfile", "--num_nodes", "2", "--no_ssh",
                            "--node_rank", "0", "--master_addr", "node0", "--master_port", "29500")
    assert ln.env["DS_ACCELERATOR"] == "cpu" and ln.env["ACCELCTL_DS_CONFIG"] == "{run_dir}/ds_config.json"
    assert check_launch(ln, node, spec, spec.targets[0]) == []
    # the same check fails a node plan whose hostfile disagrees with the target's world

    from accelctl.contract.plan import GeneratedFile
    wrong = replace(node, files=tuple(f if f.path != "hostfile" else GeneratedFile("hostfile", "node0 slots=1\n")
                                      for f in node.files))
    assert any(d.code == "E542" for d in check_launch(ln, wrong, spec, spec.targets[0]))


@pytest.mark.slow
def test_gaudi_spawn_runs_in_its_folder_on_one_node_with_the_jobs_port():
    from accelctl.api import check_plan

    spec, p = make_plan("hpu1")
    s = script_of(p)
    assert "#SBATCH --nodes=1" in s and "--gres" not in s
    assert ': "${OPTIMUM_HABANA_DIR:?' in s and 'cd "$OPTIMUM_HABANA_DIR"/examples' in s.splitlines()
    assert s.rstrip().splitlines()[-1].split() == ["gaudi_spawn.py", "--world_size", "8",
                                                   '"$SLURM_SUBMIT_DIR"/accelctl_worker.py', '"$SLURM_SUBMIT_DIR"/job.json']
    node = SlurmEngine().node_plan(p)
    (ln,) = node.launches
    assert ln.cwd == "{optimum_habana}/examples" and ln.env["PT_HPU_LAZY_MODE"] == "1"
    assert ln.argv == ("python", "gaudi_spawn.py", "--world_size", "8", "{run_dir}/accelctl_worker.py",
                       "{run_dir}/job.json")
    from accelctl.backends.gaudi.check import habana_python

    (result,) = [r for r in check_plan(p, spec) if r.tool.startswith("optimum-habana")]
    assert result.ok is (True if habana_python().exists() else None), result  # None: no .venv-habana


def test_a_deepspeed_gaudi_launch_gets_the_jobs_port_not_29500():
    _, p = make_plan("hpuz")
    s = script_of(p)
    assert "29500" not in s and '--master_port="$port"' in s and "export DS_ACCELERATOR=hpu" in s


def test_multi_node_gaudi_spawn_is_refused_at_the_nodes_setting():
    from accelctl.errors import PlanError

    specs, _ = validate_text(TEMPLATE.replace("STEPS", "4"))
    with pytest.raises(PlanError) as e:
        plan(specs[0], "hpu2")
    (d,) = e.value.diagnostics
    line = TEMPLATE.splitlines()[d.span.line - 1]
    assert line[d.span.column - 1:].startswith("nodes = 2"), (d, line)
    assert "parallel = zero" in d.hint + d.message, d


@pytest.mark.slow
def test_two_nodes_train_zero_together_under_slurm(slurm_cluster, tmp_path):
    _, p = make_plan("z", steps=5)
    t0 = time.monotonic()
    handle = launch(p, source_text=None, spec_json=None, runs_root=tmp_path)
    first_step = None
    for ev in handle.events():
        if isinstance(ev, StepMetrics) and first_step is None:
            first_step = time.monotonic() - t0
    result = handle.wait(timeout=400)
    wall = time.monotonic() - t0
    log = (handle.run_dir / "worker.log").read_text(errors="replace")
    job_id = (handle.run_dir / "slurm_job_id").read_text().strip()
    out = (handle.run_dir / f"slurm-{job_id}.out").read_text(errors="replace")
    assert result.status == "ok", (result.summary, log[-3000:], out[-3000:])
    info = slurm_cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    assert "JobState=COMPLETED" in info and "NumNodes=2" in info and "ExitCode=0:0" in info, info
    assert (handle.run_dir / "hostfile").read_text().split() == ["n1", "slots=1", "n2", "slots=1"]
    events = list(read_events(handle.run_dir / "events.jsonl"))
    steps = [e for e in events if isinstance(e, StepMetrics)]
    assert {e.rank for e in steps} == {0, 1}, steps
    for rank in (0, 1):
        mine = [e for e in steps if e.rank == rank]
        assert len(mine) >= 5 and all(e.loss is not None and e.loss > 0 for e in mine), mine
    started = [e for e in events if isinstance(e, RunStarted)]
    assert started and started[0].world_size == 2 and started[0].backend == "deepspeed", started
    # the scheduler's job, final state and exit code in the run store
    rec = read_run(handle.run_dir)
    assert rec.engine == "slurm" and rec.summary["engine"] == "slurm"
    stored = dict(rec.summary["scheduler"])
    assert stored.pop("handle").endswith(f"/{job_id}") and stored.pop("app_state") == "SUCCEEDED", rec.summary
    assert stored == {"scheduler": "slurm", "job_id": job_id, "state": "COMPLETED", "exit_code": 0}
    print(f"\nslurm 2x1 DeepSpeed ZeRO-1: submit -> first step {first_step:.1f} s, whole run {wall:.1f} s")

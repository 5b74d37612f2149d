"""``{free_port}``: one free TCP port per run, filled in by the runner (and by ``plan --format sh``)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from accelctl import api
from accelctl.contract.plan import FREE_PORT, GeneratedFile, Launch
from accelctl.plan.render import render_plan_sh
from accelctl.run import procgroup
from accelctl.run.supervision import commands, runner

ROOT = Path(__file__).resolve().parents[2]
DDP_CPU = ROOT / "workloads" / "ddp_cpu.wl"
#: writes its argv[2] and $PORT into the file argv[1]
ECHO = "import os, sys; open(sys.argv[1], 'w').write(sys.argv[2] + ' ' + os.environ['PORT'])"


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_free_port_is_bindable():
    port = commands.free_port()
    assert 0 < port < 65536 and _port_is_free(port)


def test_one_port_per_run_in_every_launch_env_and_file(runs, make_plan):
    launches = [Launch(name=f"l{i}", argv=("python", "-c", ECHO, f"{{run_dir}}/out{i}", f"127.0.0.1:{FREE_PORT}"),
                       env={"PORT": FREE_PORT}) for i in range(2)]
    plan = make_plan(launches=launches, files=[GeneratedFile("port.txt", f"port={FREE_PORT}\n")])
    handle = runner.launch(plan, source_text=None, spec_json=None)
    result = handle.wait(60)
    port = handle.values[FREE_PORT]
    assert port.isdigit() and 0 < int(port) < 65536
    for i in range(2):
        assert (result.run_dir / f"out{i}").read_text() == f"127.0.0.1:{port} {port}"
    assert (result.run_dir / "port.txt").read_text() == f"port={port}\n"
    assert result.summary["launches"][0]["argv"][-1] == f"127.0.0.1:{port}"


def test_a_plan_without_the_placeholder_picks_no_port(make_plan):
    assert commands.run_values(make_plan()) == {}


def test_free_port_without_a_picked_value_is_an_error(tmp_path):
    with pytest.raises(commands.UnresolvedPlaceholder, match=r"\{free_port\} is used by the plan but no value"):
        commands.resolve_argv(["deepspeed", "--master_port", FREE_PORT], tmp_path)


def _zero2_plan(target="cpu"):
    (spec,) = api.load_selected(DDP_CPU, "zero2_cpu")
    return api.plan(spec, target)


def test_deepspeed_single_node_gets_the_placeholder_and_explicit_port_wins():
    argv = _zero2_plan().launches[0].argv
    assert argv[argv.index("--master_port") + 1] == FREE_PORT
    text = DDP_CPU.read_text().replace("workload zero2_cpu {", "workload zero2_cpu {\n  engine deepspeed { master_port = 29611 }")
    (spec,) = [s for s in api.validate_text(text, DDP_CPU)[0] if s.name == "zero2_cpu"]
    argv = api.plan(spec, "cpu").launches[0].argv
    assert argv[argv.index("--master_port") + 1] == "29611"


def _run_sh(tmp_path, plan, env_extra=None) -> list[str]:
    script = tmp_path / "plan.sh"
    script.write_text(render_plan_sh(plan))
    rd = tmp_path / "rd"
    env = {k: v for k, v in os.environ.items() if k != "FREE_PORT"}
    env.update(RUN_DIR=str(rd), **(env_extra or {}))
    # the launcher shadowed by a shell function that records the argv it would get
    cmd = f'deepspeed() {{ printf "%s\\n" "$@" > "$RUN_DIR/argv"; }}; . {script}'
    subprocess.run(["sh", "-c", cmd], env=env, check=True, timeout=60)
    return (rd / "argv").read_text().splitlines()


def test_plan_sh_picks_a_free_port_or_takes_FREE_PORT(tmp_path):
    plan = _zero2_plan()
    argv = _run_sh(tmp_path, plan)
    port = argv[argv.index("--master_port") + 1]
    assert port.isdigit() and 0 < int(port) < 65536
    assert argv[-1] == f"{tmp_path}/rd/job.json"
    argv = _run_sh(tmp_path, plan, {"FREE_PORT": "29777"})
    assert argv[argv.index("--master_port") + 1] == "29777"


@pytest.mark.slow
def test_two_deepspeed_runs_at_once_both_finish(runs):
    """Two 2-rank ZeRO-2 runs started together (a fixed 29500 made the second one fail)."""
    plan = _zero2_plan()
    t0 = time.monotonic()
    handles = [runner.launch(plan, source_text=None, spec_json=None) for _ in range(2)]
    results = [h.wait(300) for h in handles]
    ports = [h.values[FREE_PORT] for h in handles]
    assert ports[0] != ports[1]
    for h, r in zip(handles, results):
        assert r.status == "ok", (r.summary.get("failure"), (r.run_dir / "worker.log").read_text()[-3000:])
        assert set(r.summary["stats"]["per_rank"]) == {"0", "1"}
        argv = r.summary["launches"][0]["argv"]
        assert argv[argv.index("--master_port") + 1] == h.values[FREE_PORT]
        assert not procgroup.group_alive(h.pids[0])
    # both ran at the same time: each one's span overlaps the other's
    spans = [(r.summary["launches"][0]["wall_s"]) for r in results]
    assert all(s is not None for s in spans) and time.monotonic() - t0 < sum(spans)


def test_consecutive_picks_differ():
    ports = [commands.free_port() for _ in range(20)]
    assert len(set(ports)) == 20

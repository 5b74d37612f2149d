"""Host names and addresses reach a hostfile, a launcher's argv and scripts: each passes a
strict grammar where it is written (issue 22 #1).

``ipaddress`` takes anything after an IPv6 '%' (a newline and ``slots=1``, ``$()``, ESC, NUL);
the hostfile ``fe80::1%x slots=1\\nattacker.example slots=2`` once validated, planned and
passed ``plan --check`` while DeepSpeed read a third host from it.  Here every such value is
refused at its line by validate, plan and plan --check, the renderers refuse what the check
pass would have (a spec built around it), and the hostfile of good hosts reads back through
the installed DeepSpeed's own parser as exactly the hosts the plan lists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import load, plan, render_plan_sh, validate_text
from accelctl.contract.plan import GeneratedFile, Launch
from accelctl.errors import PlanError
from accelctl.language.values import is_hostname
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]

TARGET = "  target t { device = a100  devices = 2  nodes = 2  parallel = zero(stage = 2) }\n"


def workload(engine_body: str) -> str:
    return ("workload w {\n  task pretrain { objective = mlm  train_steps = 4 }\n"
            '  model hf("bert-base-uncased") { stand_in = bert(layers = 2, hidden = 64, heads = 4) }\n'
            f"  engine deepspeed {{ {engine_body} }}\n" + TARGET + "}\n")


def quoted(text: str) -> str:
    """``text`` as a string literal of the language: newline and tab escaped, other control
    characters written raw into the file (as a fuzzer writes them)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


#: scope ids ``ipaddress`` accepts and no hostfile line, script or argv word may hold
BAD_SCOPES = ["x slots=1\nattacker.example", "a\x00b", "a b", "$(touch /tmp/p)", "`id`", "\x1b[31m", "a%b",
              "é", "eth0\n", "eth0\t", "", "a;b", "a'b", 'a"b', "a/b", "a\\b", "\u202e", "a\rb", "x" * 65]
BAD_HOSTS = [f"fe80::1%{s}" for s in BAD_SCOPES] + [
    "10.0.0.1%eth0", "node 1", "-node", "node-", "ａ.example", "node\x00", "\x00", "attacker.example slots=9",
    "a..b", "a" * 64, "n\u00e9ud", "[fe80::1]", "fe80::1%%eth0"]
GOOD_HOSTS = ["node-1", "node-1.cluster.local", "10.0.0.1", "fd00::1", "fe80::1%eth0", "fe80::1%en0.100",
              "fe80::1%2", "fe80::1%ib_0-a", "localhost", "node-1."]


@pytest.mark.parametrize("host", GOOD_HOSTS)
def test_good_hosts_pass(host):
    assert is_hostname(host)


@pytest.mark.parametrize("host", BAD_HOSTS, ids=ascii)
def test_bad_hosts_and_scope_ids_fail(host):
    assert not is_hostname(host)


def _errors(text: str) -> list[tuple[str, int, int]]:
    _, diags = validate_text(text, "w.wl")
    return [(d.code, d.span.line, d.span.column) for d in diags if d.severity == "error"]


@pytest.mark.parametrize("host", BAD_HOSTS, ids=ascii)
def test_each_bad_host_is_refused_at_its_line_in_every_field(host):
    assert _errors(workload(f'hosts = [{quoted(host)}, "node-2"]')) == [("E215", 4, 31)]
    assert _errors(workload(f'hosts = ["node-1", {quoted(host)}]')) == [("E215", 4, 41)]
    assert _errors(workload(f'hosts = ["node-1", "node-2"]  master_addr = {quoted(host)}')) == [("E215", 4, 66)]
    endpoint = ("[" + host + "]" if ":" in host else host) + ":29400"
    text = workload('hosts = ["node-1", "node-2"]').replace(
        "  engine deepspeed", f"  engine torchrun {{ rdzv_endpoint = {quoted(endpoint)} }}\n  engine deepspeed")
    assert _errors(text) == [("E217", 4, 37)]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], capture_output=True, cwd=cwd, env=env,
                          timeout=300)


REPRODUCTIONS = {
    "hostfile": 'hosts = ["fe80::1%x slots=1\\nattacker.example", "node-2"]',
    "master_addr": 'hosts = ["node-1", "node-2"]  master_addr = "fe80::1%a\x00b"',
    "hosts_nul": 'hosts = ["fe80::1%a\x00b", "node-2"]',
    "scope_subst": 'hosts = ["node-1", "fe80::1%$(touch pwned)"]',
}


@pytest.mark.parametrize("case", REPRODUCTIONS)
def test_the_issues_reproductions_are_refused_by_validate_plan_and_check(tmp_path, case):
    wl = tmp_path / "w.wl"
    wl.write_bytes(workload(REPRODUCTIONS[case]).encode())
    body = REPRODUCTIONS[case]
    col = 66 if "master_addr" in body else 41 if body.startswith('hosts = ["node-1"') else 31
    for args in (["validate"], ["plan"], ["plan", "--check"], ["plan", "-f", "sh"], ["plan", "-f", "json"]):
        r = _cli(*args, str(wl), cwd=tmp_path)
        assert r.returncode == 1, (args, r.returncode, r.stderr[-1500:])
        said = r.stdout + r.stderr
        if "json" in args:
            diags = [d for d in json.loads(r.stdout)["diagnostics"] if d["severity"] == "error"]
            assert [(d["code"], d["line"], d["column"]) for d in diags] == [("E215", 4, col)], diags
        else:
            assert f"w.wl:4:{col}: error[E215]".encode() in said, (args, said[-1500:])
        assert b"Traceback" not in said and b"attacker.example slots=" not in said
        assert b"\x00" not in r.stdout or args == ["validate"] or args == ["plan"], args  # the script, the JSON
    assert not (tmp_path / "pwned").exists()


def test_run_refuses_before_making_a_run_folder(tmp_path):
    wl = tmp_path / "w.wl"
    wl.write_bytes(workload(REPRODUCTIONS["master_addr"]).encode())
    r = _cli("run", str(wl), "-t", "t", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 1 and b"w.wl:4:66: error[E215]" in r.stdout + r.stderr, r.stderr[-1500:]
    assert not any((tmp_path / "runs").glob("*/*")) if (tmp_path / "runs").exists() else True


def _spec_with(settings: dict):
    spec = next(s for s in load_text(workload('hosts = ["node-1", "node-2"]')))
    eng = replace(spec.engines["deepspeed"], settings={**spec.engines["deepspeed"].settings, **settings})
    return replace(spec, engines={**spec.engines, "deepspeed": eng})


def load_text(text: str):
    specs, diags = validate_text(text, "w.wl")
    assert not [d for d in diags if d.severity == "error"], diags
    return specs


@pytest.mark.parametrize("settings", [{"hosts": ["fe80::1%x slots=1\nattacker.example", "node-2"]},
                                      {"hosts": ["node-1", "fe80::1%a\x00b"]},
                                      {"master_addr": "fe80::1%a\x00b"}], ids=ascii)
def test_the_plan_refuses_a_bad_host_the_check_pass_did_not_see(settings):
    """Defence in depth: a spec built around the check pass (an API caller) gets a positioned
    refusal, never a hostfile line or an argv word from it."""
    with pytest.raises(PlanError) as exc:
        plan(_spec_with(settings), "t")
    assert [d.code for d in exc.value.diagnostics] == ["E215"] and exc.value.diagnostics[0].span.line == 4


def test_plan_sh_refuses_a_nul_anywhere_rather_than_cut_a_word():
    p = plan(load_text(workload('hosts = ["node-1", "node-2"]'))[0], "t")
    for bad in (replace(p, launches=(Launch("x", ("echo", "a\x00b")),)),
                replace(p, launches=(Launch("x", ("echo",), env={"E": "a\x00b"}),)),
                replace(p, files=(GeneratedFile("hostfile", "a\x00b slots=1\n"),))):
        with pytest.raises(PlanError, match=r"\\x00"):
            render_plan_sh(bad)


@pytest.mark.parametrize("hosts", [["node-1", "node-2"], ["fe80::1%eth0", "10.0.0.2"],
                                   ["fd00::1", "fe80::2%ib0.8001", "node-3.cluster"]])
def test_deepspeeds_own_parser_reads_exactly_the_planned_hosts(hosts):
    """The hostfile as written, through the installed DeepSpeed's ``_parse_hostfile``
    (``fetch_hostfile`` reads lines and hands them to it): the hosts of the plan, in order,
    each with the target's slots, and nothing else."""
    runner = pytest.importorskip("deepspeed.launcher.runner")
    nodes = len(hosts)
    text = workload(f"hosts = [{', '.join(quoted(h) for h in hosts)}]").replace("nodes = 2", f"nodes = {nodes}")
    p = plan(load_text(text)[0], "t")
    hostfile = next(f.content for f in p.files if f.path == "hostfile")
    pool = runner._parse_hostfile(hostfile.splitlines(keepends=True))
    assert list(pool.items()) == [(h, 2) for h in hosts]


def test_plan_check_compares_the_hostfile_deepspeed_reads_with_the_planned_hosts():
    """``plan --check`` asks DeepSpeed's parser and compares: a hostfile that reads as other
    hosts than the plan lists is an E543 at the hosts, not ``hostfile: ok``."""
    pytest.importorskip("deepspeed.launcher.runner")
    from accelctl.backends.deepspeed.check import check_launch

    spec = load_text(workload('hosts = ["node-1", "node-2"]'))[0]
    p = plan(spec, "t")
    target = spec.target("t")
    assert [d for d in check_launch(p.launches[0], p, spec, target) if d.severity == "error"] == []
    forged = tuple(replace(f, content="node-1 slots=2\nattacker.example slots=2\n")
                   if f.path == "hostfile" else f for f in p.files)
    diags = check_launch(p.launches[0], replace(p, files=forged), spec, target)
    assert [d.code for d in diags if d.severity == "error"] == ["E543"]
    assert "attacker.example" in diags[0].message and diags[0].span.line == 4

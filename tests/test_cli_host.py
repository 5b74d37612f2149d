"""The CLI states every plan's host input (issue 28 item 2): each verb that plans (``plan``,
``plan --diff``, ``validate``, ``pick``, ``fit``; ``sweep`` runs, so its tests start processes)
reads this machine's facts once (``HostFacts.here()``) and passes them to every plan it
compiles; ``api.plan(..., host=None)`` still reads this machine for library callers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_hosts import AVX2

from accelctl import api
from accelctl.cli import main
from accelctl.contract import hostfacts
from accelctl.contract.hostfacts import HostFacts
from accelctl.plan import compile as plan_compile
from accelctl.plan.render import printed

ROOT = Path(__file__).resolve().parents[1]
#: a made-up machine: an AVX2-only CPU (no avx512_bf16, no amx), 3 cores, 12 GiB free
AVX2_ONLY = HostFacts(cores=3, cpu_model="made-up AVX2-only CPU", flags=AVX2, memory_bytes=12 * 2**30)

WORKLOAD = """workload tiny_bf16 {
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 64 tokens)
  optimizer adamw(lr = 0.001)
  precision bf16
  batch { micro = 4  accumulation = 1 }
  measure { warmup = 1 steps  steps = 2 steps }

  target cpu { devices = 1 }
  target cpu2 { device = cpu  devices = 1  precision = fp32 }
}
"""


@pytest.fixture
def workload(tmp_path) -> Path:
    path = tmp_path / "tiny.wl"
    path.write_text(WORKLOAD)
    return path


@pytest.fixture
def hosts_seen(monkeypatch):
    """Every ``compile_plan``'s ``host`` argument, and how often this machine was read."""
    seen: dict[str, list] = {"hosts": [], "reads": []}
    real_compile, real_here = plan_compile.compile_plan, HostFacts.here.__func__

    def compile_plan(*args, host=None, **kwargs):
        seen["hosts"].append(host)
        return real_compile(*args, host=host, **kwargs)

    def here(cls):
        seen["reads"].append(real_here(cls))
        return seen["reads"][-1]

    monkeypatch.setattr(plan_compile, "compile_plan", compile_plan)
    monkeypatch.setattr(HostFacts, "here", classmethod(here))
    return seen


def test_the_clis_plan_is_the_api_plan_for_this_host(workload, hosts_seen, capsys):
    """What ``accelctl plan`` prints is ``api.plan(..., host=HostFacts.here())`` with the facts
    the verb read (the available memory moves between two reads: the one the CLI read)."""
    assert main(["plan", str(workload), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (here,) = hosts_seen["reads"]
    assert here.cpu_model and here.cores >= 1 and here.flags
    for spec in api.load(workload):
        for t in spec.targets:
            (got,) = [p["plan"] for p in doc["result"]["plans"] if p["target"] == t.name]
            assert got == json.loads(json.dumps(printed(api.plan(spec, t, host=here)).to_dict())), t.name


@pytest.mark.parametrize("argv", [
    ["plan", "{wl}", "--json"],
    ["plan", "{wl}", "-t", "cpu"],
    ["plan", "{wl}", "--diff", "cpu", "cpu2"],
    ["validate", "{wl}"],
    ["fit", "{wl}", "-t", "cpu", "--json"],
    ["pick", str(ROOT / "workloads" / "t5_3b_summarization.wl"), "--work", "1e6 samples", "--json"],
])
def test_every_plan_of_a_verb_is_given_the_host_it_read_once(workload, hosts_seen, argv, capsys):
    main([a.format(wl=workload) for a in argv])
    capsys.readouterr()
    assert hosts_seen["hosts"], "the verb planned nothing"
    assert all(isinstance(h, HostFacts) for h in hosts_seen["hosts"]), hosts_seen["hosts"]
    assert len({id(h) for h in hosts_seen["hosts"]}) == 1 and len(hosts_seen["reads"]) == 1


def test_a_made_up_host_is_what_the_cli_plans_for(workload, monkeypatch, capsys):
    """``accelctl plan`` on this machine made to read as an AVX2-only CPU with 3 cores: the
    plan says what that machine would do (bf16 emulated: the warning; 3 threads)."""
    monkeypatch.setattr(HostFacts, "here", classmethod(lambda cls: AVX2_ONLY))
    assert main(["plan", str(workload), "-t", "cpu", "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)["result"]["plans"]
    plan = only["plan"]
    assert plan["job"]["threads"] == 3
    assert any("bf16 on a CPU without native bf16" in w for w in plan["warnings"]), plan["warnings"]
    # the same plan as the API's for that host; a host with native bf16 gets no such warning
    (spec,) = api.load(workload)
    assert json.loads(json.dumps(printed(api.plan(spec, "cpu", host=AVX2_ONLY)).to_dict())) == plan
    native = HostFacts(cores=3, cpu_model="made-up AVX-512 CPU", flags=AVX2 | {"avx512f", "avx512_bf16"},
                       memory_bytes=12 * 2**30)
    assert not any("without native bf16" in w for w in api.plan(spec, "cpu", host=native).warnings)


def test_the_api_default_still_reads_this_machine(workload, monkeypatch):
    (spec,) = api.load(workload)
    assert hostfacts._CURRENT.get() is None
    monkeypatch.setattr(HostFacts, "here", classmethod(lambda cls: AVX2_ONLY))  # "this machine", for the test
    assert api.plan(spec, "cpu").job.threads == 3 and api.plan(spec, "cpu") == api.plan(spec, "cpu", host=AVX2_ONLY)

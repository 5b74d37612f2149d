"""A foreground ``accelctl run`` is start + attach (``accelctl.run.supervision.foreground``): the workloads are
checked and planned once, here, and the supervisor is given those plans (``accelctl.run.supervision.batch``)
-- never a command line to parse, never the workload file to read again -- and the viewer
imports no torch.  The signals' cases (Ctrl-C, SIGTERM, a hang-up, a closed pipe) are in
tests/e2e/test_cpu_targets.py and tests/test_cli_pipes.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_json_output import TINY_RUN  # the cheapest real run the suite makes

from accelctl import api, exitcodes
from accelctl.entrypoints import SUPERVISOR
from accelctl.run.supervision import batch, orchestrate

ROOT = Path(__file__).resolve().parents[2]


def _batch_of(path: Path, req: orchestrate.Request, **kw) -> batch.Batch:
    source, specs = api.load_selected_source(str(path), None, [])
    chosen = orchestrate.choose(specs, req)
    return batch.Batch(tuple(c.planned() for c in chosen), source, req, **kw)


@pytest.mark.parametrize("name, rehearse", [("bloomz.wl", False), ("bloomz.wl", True), ("ddp_cpu.wl", False),
                                            ("tiny_gpt2.wl", False)])
def test_the_supervisor_is_given_every_plan_and_option_as_checked(name, rehearse):
    """What a face checked and planned comes back from the supervisor's input equal: every plan,
    its settings, the source, the request (``--launch``, ``--preflight``) and ``--json``."""
    req = orchestrate.Request(rehearse=rehearse, runs_dir="/tmp/some runs", only=("node0", "-odd"), preflight=True,
                              preflight_timeout=12.5)
    given = _batch_of(ROOT / "workloads" / name, req, json=True)
    assert given.planned and given.source
    assert batch.decode(batch.encode(given)) == given
    resumed = batch.Batch(request=orchestrate.Request(runs_dir="runs"), resume="20261127-005942-tiny-cpu-60a7",
                          resume_file="w.wl")
    assert batch.decode(batch.encode(resumed)) == resumed


@pytest.mark.parametrize("data, says", [
    (b"", "not a batch"), (b"\xff\xfe", "not a batch"), (b"[]", "version"), (b'{"version": 99}', "version"),
    (b'{"version": 1, "request": {}}', "request.rehearse"),
])
def test_an_input_that_is_no_batch_is_refused_saying_why(data, says):
    with pytest.raises(batch.BatchError, match=says):
        batch.decode(data)


def test_a_batch_with_a_broken_plan_or_a_wrong_type_is_refused_saying_where():
    good = json.loads(batch.encode(_batch_of(ROOT / "workloads" / "ddp_cpu.wl", orchestrate.Request())))
    for path, value, says in ((("planned", 0, "repeats"), "2", r"planned\[0\]\.repeats: str"),
                              (("planned", 0, "plan", "from_elsewhere"), 7, r"planned\[0\]\.plan: .*unknown field"),
                              (("request", "preflight"), 1, r"request\.preflight: int"),
                              (("json",), None, "json: NoneType")):
        doc = json.loads(json.dumps(good))
        at = doc
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value
        with pytest.raises(batch.BatchError, match=says):
            batch.decode(json.dumps(doc).encode())


def test_the_supervisor_refuses_an_input_that_is_no_batch():
    cp = subprocess.run([sys.executable, "-m", SUPERVISOR], input=b"run w.wl --headless", capture_output=True,
                        timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == exitcodes.USAGE, cp.stderr
    assert b"started by `accelctl run` with the runs it planned on its stdin" in cp.stderr


@pytest.mark.slow
def test_the_supervisor_runs_the_plans_it_is_given_and_never_reads_the_workload_file(tmp_path):
    """The workload file is gone once it has been planned: the supervisor runs the plan, and the
    run stores the source that was checked."""
    wl = tmp_path / "tiny.wl"
    wl.write_text(TINY_RUN)
    runs = tmp_path / "runs"
    given = _batch_of(wl, orchestrate.Request(runs_dir=str(runs)))
    wl.unlink()
    cp = subprocess.run([sys.executable, "-m", SUPERVISOR], input=batch.encode(given), capture_output=True,
                        timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert b"status: ok" in cp.stdout
    (run_dir,) = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert (run_dir / "workload.wl").read_text() == TINY_RUN


@pytest.mark.slow
def test_the_viewer_imports_no_torch_and_ends_with_the_run(tmp_path):
    """``accelctl.cli.main(["run", ...])`` in a process of its own: the run is ok, its exit code
    is the command's, its console stream is this process's stdout, and torch was imported by
    the supervisor's worker, never here; no console file is left."""
    wl = tmp_path / "tiny.wl"
    wl.write_text(TINY_RUN)
    runs = tmp_path / "runs"
    code = ("import sys\nfrom accelctl.cli import main\n"
            f"rc = main(['run', {str(wl)!r}, '--headless', '--runs-dir', {str(runs)!r}])\n"
            "print('TORCH', 'torch' in sys.modules, 'RC', rc)\n")
    cp = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.stdout.splitlines()[-1] == "TORCH False RC 0", cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "status: ok" in cp.stdout and "accelctl: workload tiny_json -> target cpu" in cp.stdout
    (run_dir,) = runs.iterdir()  # the run's folder alone: the viewer removed the console files it copied
    assert not run_dir.name.startswith(".")

"""A foreground ``accelctl run`` is start + attach (``accelctl.run.foreground``): the supervisor
is given ``run``'s options as they were (rebuilt from the parsed arguments), and the viewer
imports no torch.  The signals' cases (Ctrl-C, SIGTERM, a hang-up, a closed pipe) are in
tests/e2e/test_cpu_targets.py and tests/test_cli_pipes.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_json_output import TINY_RUN  # the cheapest real run the suite makes

from accelctl.cli import build_parser
from accelctl.cli.run import supervisor_argv

ROOT = Path(__file__).resolve().parents[2]


def _parsed(argv: list[str]) -> dict:
    args = build_parser().parse_args(argv)
    return {k: v for k, v in vars(args).items() if k not in ("fn", "run_parser")}


@pytest.mark.parametrize("argv", [
    ["run", "w.wl"],
    ["run", "-t", "cpu", "--workload=-odd", "--set", "micro=16", "--set", "precision=fp32", "w.wl"],
    ["run", "--rehearse", "--fp8", "--preflight", "--preflight-timeout", "12", "--launch", "node0", "--launch",
     "node1", "-e", "torchrun", "--", "-starts-with-a-dash.wl"],
    ["run", "--mlflow", "--wandb", "proj", "--tensorboard", "tb dir/", "w.wl"],
    ["run", "--resume", "20261127-005942-tiny-cpu-60a7"],
])
def test_the_supervisor_is_given_every_option_as_it_was(argv):
    """The supervisor's command line parses back to the same options (``--headless`` and
    ``--runs-dir`` apart, which it is always given); a value is never taken for an option."""
    given = build_parser().parse_args(argv)
    again = _parsed(["run", "--headless", *supervisor_argv(given)])
    assert again == {**_parsed(argv), "headless": True}


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

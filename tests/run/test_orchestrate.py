"""The one run orchestrator (``accelctl.run.supervision.orchestrate``): what ``run``, the TUI and ``sweep --run``
check before anything starts, and how it groups runs into worker processes.  Nothing here starts
a process."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from accelctl import exitcodes
from accelctl.api import validate_text
from accelctl.cli import main
from accelctl.errors import AccelctlError
from accelctl.run.supervision import orchestrate

#: a cpu target its Kubernetes engine refuses to start with a runs folder off the pods' volume
K8S = Path(__file__).parents[1] / "data" / "workloads" / "k8s_cpu.wl"

TWO = """
workload a {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2)
  target cpu { devices = 1 }
}
workload b {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2)
  measure { repeat = 3 }
  target cpu { devices = 1 }
}
workload c {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2)
  target cpu { devices = 1 }
}
"""


def _specs(text: str):
    specs, diags = validate_text(text)
    assert not [d for d in diags if d.severity == "error"], diags
    return specs


def test_sweep_run_refuses_a_point_its_engine_cannot_start_as_run_does(tmp_path):
    wl = K8S
    runs = tmp_path / "elsewhere"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["sweep", str(wl), "--over", "batch.micro=2", "--run", "--runs-dir", str(runs)])
    assert code == exitcodes.FAILED
    assert "batch.micro=2 / cpu: NOT RUN: target cpu (engine kubernetes): the runs folder" in err.getvalue()
    assert not runs.exists()  # nothing launched, no run folder


def test_an_unknown_launch_is_a_usage_error_before_anything_starts():
    req = orchestrate.Request(only=("node7",))
    chosen = orchestrate.choose(_specs(TWO)[:1], req)
    with pytest.raises(AccelctlError) as caught:
        orchestrate.refuse_unstartable(chosen, None, req)
    assert caught.value.exit_code == exitcodes.USAGE and "has no launch node7 (launches: " in str(caught.value)


def test_repeats_are_planned_one_round_per_process_and_never_share_a_worker():
    chosen = orchestrate.choose(_specs(TWO), orchestrate.Request())
    assert [c.repeats for c in chosen] == [1, 3, 1]
    assert chosen[1].plan.job.measure.repeat == 1  # each of the 3 processes measures one round
    # a, b, c: b is a series of independent processes, so a and c are not neighbours to share with
    assert orchestrate.plan_groups(chosen, orchestrate.Request()) == [[0], [1], [2]]
    assert orchestrate.plan_groups(chosen, orchestrate.Request(preflight=True)) == [[0], [1], [2]]
    ac = [chosen[0], chosen[2]]
    assert orchestrate.plan_groups(ac, orchestrate.Request()) == [[0, 1]]  # one stack, one worker
    assert orchestrate.plan_groups(ac, orchestrate.Request(preflight=True)) == [[0], [1]]  # preflighted: one each

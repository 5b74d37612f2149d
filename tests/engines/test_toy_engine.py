"""An engine is one row in one table: a toy engine written in one file and registered by one
line of ``accelctl.language.plugins.ENGINES`` is validated, planned, refused at its own code,
listed by ``--engine``'s help and documented, with no other change to accelctl."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TOY = '''
import dataclasses

from accelctl.contract.plan import GeneratedFile
from accelctl.engines.base import Engine, engine_refusal
from accelctl.language import values as V
from accelctl.language.plugins import EngineRow

ROW = EngineRow(
    name="toy",
    engine="toy_engine:ToyEngine",
    summary="a toy queue that takes its submission as a file",
    settings={"queue": V.token(r"[a-z]+", '"main"', "toy queue name", bare=True)},
    meanings={"queue": "the toy queue the job goes to"},
    code="E589",
    refuses="`engine toy` has no `queue`",
)


class ToyEngine(Engine):
    row = ROW

    def wrap(self, spec, target, built, job, settings):
        queue = settings.settings.get("queue")
        if not queue:
            raise engine_refusal(ROW.code, "toy", spec, target, "queue", "engine toy needs a queue",
                                 'write engine toy { queue = "main" }')
        submission = GeneratedFile("toy-submit.txt", f"queue {queue}\\n", role="the toy submission")
        return dataclasses.replace(built, files=[*built.files, submission])
'''

#: what registers the toy: one line in the engines' table, before accelctl reads it
DRIVER = '''
import sys
sys.path.insert(0, sys.argv.pop(1))
from accelctl.language import plugins
plugins.ENGINES["toy"] = "toy_engine:ROW"
if sys.argv[1] == "--docs":
    sys.path.insert(0, "scripts")
    import gen_language_tables as g
    s = g.sections()
    print(s["engines"]); print(s["engine-codes"])
else:
    from accelctl.cli import main
    sys.exit(main(sys.argv[1:]))
'''

WORKLOAD = """\
workload w {
  task pretrain
  model gpt2(layers = 1, hidden = 32, heads = 2)
  dataset synthetic(seq_len = 8 tokens)
  batch { micro = 1 }
  engine toy { QUEUE }
  target t { device = cpu  devices = 1  precision = fp32  engine = toy }
}
"""


@pytest.fixture
def accelctl(tmp_path):
    (tmp_path / "toy_engine.py").write_text(TOY)

    def run(*args: str, queue: str = 'queue = "main"') -> subprocess.CompletedProcess:
        (tmp_path / "w.wl").write_text(WORKLOAD.replace("QUEUE", queue))
        argv = [str(tmp_path / "w.wl") if a == "W" else a for a in args]
        return subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path), *argv], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    return run


def test_the_toy_engine_validates_and_refuses_a_setting_it_does_not_declare(accelctl):
    ok = accelctl("validate", "W")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = accelctl("validate", "W", "--json", queue='queu = "main"')
    assert bad.returncode == 1
    (diag,) = json.loads(bad.stdout)["diagnostics"]
    assert diag["line"] == 6 and "queu" in diag["message"] and "queue" in diag["hint"]
    wrong = accelctl("validate", "W", "--json", queue='queue = "Main Queue"')
    assert wrong.returncode == 1 and "toy queue name" in wrong.stdout


def test_the_toy_engine_plans_its_submission_and_refuses_at_its_own_code(accelctl):
    planned = accelctl("plan", "W", "--json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    (planned,) = json.loads(planned.stdout)["result"]["plans"]
    plan = planned["plan"]
    assert plan["engine"] == "toy" and not planned["refused"]
    (submission,) = [f for f in plan["files"] if f["path"] == "toy-submit.txt"]
    assert submission["content"] == "queue main\n"
    refused = accelctl("plan", "W", "--json", queue="")
    assert refused.returncode == 1
    (diag,) = json.loads(refused.stdout)["diagnostics"]
    assert diag["code"] == "E589" and diag["line"] == 7  # the target's `engine =` line: the block is empty


def test_the_toy_engine_is_in_the_help_and_the_docs(accelctl):
    helped = accelctl("plan", "--help")
    assert "aws_batch, toy" in " ".join(helped.stdout.split())
    docs = accelctl("--docs")
    assert docs.returncode == 0, docs.stderr
    assert "**engine toy** — a toy queue that takes its submission as a file" in docs.stdout
    assert "| `queue` | name | toy queue name `[a-z]+` | the toy queue the job goes to |" in docs.stdout
    assert "| E589 | `engine toy` has no `queue` |" in docs.stdout

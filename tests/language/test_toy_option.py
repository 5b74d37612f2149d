"""A target option is one field: a copy of accelctl whose ``TargetOptions`` has one more line
(and nothing else changed) validates the new key, refuses a bad value at its line, carries it
through the plan, drops it from a rehearsal and documents it in docs/language.md's target table."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: the one field that adds the option, after the last field of TargetOptions
FIELD = ('    toy_knob: int | None = key("integer", "how hard the toy knob is turned", "untouched", lo=1, hi=9,\n'
         '                               read_by="the toy launcher")\n')
ANCHOR = "    def written(self)"

DRIVER = '''
import sys
sys.path.insert(0, sys.argv.pop(1))
import accelctl
assert accelctl.__file__.startswith(sys.path[0]), accelctl.__file__
if sys.argv[1] == "--docs":
    sys.path.insert(1, sys.argv.pop(2))
    import gen_language_tables as g
    print(g.sections()["keys-target"])
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
  target t {
    device = DEVICE  devices = 1
    KNOB
  }
}
"""


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """accelctl copied, its options module given the toy field, nothing else touched."""
    root = tmp_path_factory.mktemp("toy_option")
    shutil.copytree(ROOT / "accelctl", root / "accelctl", ignore=shutil.ignore_patterns("__pycache__"))
    options = root / "accelctl" / "workload" / "options.py"
    text = options.read_text(encoding="utf-8")
    assert text.count(ANCHOR) == 1
    options.write_text(text.replace(ANCHOR, FIELD + "\n" + ANCHOR), encoding="utf-8")
    return root


@pytest.fixture
def accelctl(copy, tmp_path):
    def run(*args: str, knob: str = "toy_knob = 3", device: str = "cpu  precision = fp32") -> subprocess.CompletedProcess:
        (tmp_path / "w.wl").write_text(WORKLOAD.replace("KNOB", knob).replace("DEVICE", device))
        argv = [str(tmp_path / "w.wl") if a == "W" else a for a in args]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        return subprocess.run([sys.executable, "-c", DRIVER, str(copy), *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    return run


def test_the_toy_option_validates_and_its_bad_value_is_refused_at_its_line(accelctl):
    ok = accelctl("validate", "W")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = accelctl("validate", "W", "--json", knob="toy_knob = 12")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    (diag,) = json.loads(bad.stdout)["diagnostics"]
    assert diag["line"] == 8 and "toy_knob" in diag["message"] and "9" in diag["message"] + diag.get("hint", "")
    typo = accelctl("validate", "W", "--json", knob="toy_knobb = 3")
    assert typo.returncode == 1
    (diag,) = json.loads(typo.stdout)["diagnostics"]
    assert "toy_knob" in diag.get("hint", "")


def test_the_toy_option_is_in_the_plan_and_a_rehearsal_says_it_drops_it(accelctl):
    planned = accelctl("plan", "W", "--json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    (entry,) = json.loads(planned.stdout)["result"]["plans"]
    assert entry["target"] == "t" and not entry["refused"]
    rehearsed = accelctl("plan", "W", "--json", "--rehearse", device="gaudi2  precision = bf16")
    assert rehearsed.returncode == 0, rehearsed.stdout + rehearsed.stderr
    assert "device options not rehearsed: toy_knob" in rehearsed.stdout


def test_the_toy_option_is_documented_from_its_row(accelctl):
    docs = accelctl("--docs", str(ROOT / "scripts"))
    assert docs.returncode == 0, docs.stderr
    assert "| `toy_knob` | whole number | 1 to 9 | untouched | how hard the toy knob is turned |" in docs.stdout

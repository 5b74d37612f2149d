"""``plan -f sh`` writes no line a value could leave: the comment line's names, the
environment's names and the generated files' names are refused whole when they hold a control
character (or any character ``str.isprintable`` refuses), naming the value; everything else
travels in single quotes, which a control character does not end.

The parser never makes such names (a forged parse-cache entry could: ``"ck\\ntouch PWNED\\n#"``),
so the values are put into the spec and the plan directly; what is rendered runs under bash
and dash, and nothing may run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from accelctl.api import plan, render_plan, render_plan_sh, validate_text
from accelctl.contract.plan import GeneratedFile, Launch
from accelctl.errors import PlanError
from accelctl.frozen import replace

SHELLS = [s for s in ("bash", "dash") if shutil.which(s)]
TEXT = """
workload ck {
  task pretrain
  model gpt2(layers = 1, hidden = 32, heads = 2)
  dataset synthetic(seq_len = 16)
  target cpu { devices = 1  threads = 1 }
}
"""
#: the issue's name, and the other characters that end or hide a line
CONTROLS = ["ck\ntouch {mark}\n#", "ck\rtouch {mark}", "ck\x1b[2Ktouch {mark}", "ck\x00touch {mark}",
            "ck\x85touch {mark}", "ck\u2028touch {mark}", "ck\ttouch", "ck\x7f"]


@pytest.fixture(scope="module")
def base():
    specs, diags = validate_text(TEXT, "ck.wl")
    assert not diags, diags
    return specs[0], plan(specs[0], "cpu")


def _refused(p) -> str:
    with pytest.raises(PlanError) as exc:
        render_plan(p, "sh")
    message = str(exc.value)
    assert message.startswith("plan -f sh: ") and message.endswith("; not rendered") and "\n" not in message
    assert exc.value.exit_code == 1
    return message


@pytest.mark.parametrize("name", CONTROLS, ids=ascii)
def test_a_workload_name_with_a_control_character_is_refused_naming_it(base, name, tmp_path):
    spec, _ = base
    evil = name.format(mark=tmp_path / "PWNED")
    p = plan(replace(spec, name=evil), "cpu")  # planned from the spec, as a forged parse gives it
    message = _refused(p)
    assert f"the workload name {evil!r} holds " in message, message


@pytest.mark.parametrize("field,what", [("target", "target name"), ("backend", "backend")])
def test_the_other_names_of_the_comment_line_are_refused(base, field, what):
    _, p = base
    message = _refused(replace(p, **{field: "cpu\ntouch PWNED"}))
    assert f"the {what} 'cpu\\ntouch PWNED' holds the control character \\x0a" in message


def test_a_generated_file_name_or_an_environment_name_that_would_leave_its_word_is_refused(base):
    _, p = base
    named = replace(p, files=(*p.files, GeneratedFile("a\nb.json", "{}")))
    assert "the generated file name 'a\\nb.json' holds the control character \\x0a" in _refused(named)
    (launch,) = p.launches
    for key in ("X;touch PWNED;Y", "A\nB", "1X", "X-Y", ""):
        env = replace(p, launches=(replace(launch, env={**launch.env, key: "1"}),))
        assert f"environment name {key!r} is not a shell variable name" in _refused(env)


@pytest.mark.parametrize("shell", SHELLS)
def test_control_characters_in_quoted_values_stay_in_their_words(base, shell, tmp_path):
    """Environment values, argv, the working folder and file contents hold every control
    character but NUL: the script keeps each in its single-quoted word, nothing runs, and the
    launch gets its words back byte for byte."""
    _, p = base
    mark = tmp_path / "PWNED"
    evil = [c.format(mark=mark) for c in CONTROLS if "\x00" not in c] + [f"\ntouch {mark}\n", f"'\ntouch {mark}\n'"]
    record = ('for a in "$@"; do printf "%s\\036" "$a"; done > "$RUN_DIR/argv.out"; '
              'printf "%s" "$EVIL" > "$RUN_DIR/env.out"')
    work = tmp_path / "w\nd"
    work.mkdir()
    probe = Launch("probe", ("sh", "-c", record, "sh", *evil), env={"EVIL": "".join(evil)}, cwd=str(work))
    hostile = replace(p, launches=(probe,), files=(GeneratedFile("evil.txt", "".join(evil)),))
    script = tmp_path / "plan.sh"
    script.write_text(render_plan_sh(hostile), encoding="utf-8")
    rd = tmp_path / "rd"
    r = subprocess.run([shell, str(script)], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(rd)},
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not mark.exists() and not list(tmp_path.glob("*PWNED*"))
    assert (rd / "argv.out").read_bytes().decode().split("\x1e")[:-1] == evil
    assert (rd / "env.out").read_bytes().decode() == "".join(evil)
    assert (rd / "evil.txt").read_bytes().decode() == "".join(evil)
    # every line of the script outside a quoted word is printable: the comment, the set-up, the launch's head
    first_lines = Path(script).read_text().split("\n")[:4]
    assert all(line.isprintable() for line in first_lines)

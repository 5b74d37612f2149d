"""Memory for large inputs (issue 22 item 10): ``accelctl validate`` of a file at the 1 MiB cap
stays within the figures of docs/language.md (Limits), measured as peak RSS
(``resource.getrusage``) of a child process, above that process's own baseline (the
interpreter, accelctl's imports and a tiny file validated: the same child, first).

Before: one long string cost ~290 bytes per character (the regex engine's backtracking state
for the STRING terminal's per-character alternation: 300 MB for 1 MiB), and a syntax error
after a long list had lark build a tree of it beside the fast parser's (570 MB); a problem per
line kept 262,000 diagnostics (230 MB; 1.3 GB as a ``--json`` document)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.dsl.source import MAX_SOURCE_BYTES

ROOT = Path(__file__).resolve().parents[2]

#: the documented bounds: peak RSS above the baseline, in multiples of the file's size
STRING_FACTOR = 8
LIST_FACTOR = 160

_CHILD = """
import io, json, resource, sys, contextlib
from accelctl.cli import main
def quiet(*args):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(["validate", *args])
quiet(*sys.argv[3:], sys.argv[1])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
code = quiet(*sys.argv[3:], sys.argv[2])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "base_kib": base, "peak_kib": peak}))
"""


def _fill(head: str, tail: str, unit: str, sep: str = "") -> str:
    """``head`` + ``unit`` repeated (joined by ``sep``) + ``tail``, at most the cap in bytes."""
    n = (MAX_SOURCE_BYTES - len(head) - len(tail) + len(sep)) // (len(unit) + len(sep))
    return head + sep.join([unit] * n) + tail


SHAPES = {
    # one string of a million characters
    "one long string": (_fill('workload w {\n  description = "', '"\n}\n', "x"), STRING_FACTOR),
    # the densest AST a byte makes: a number and a comma per two bytes (524,000 values)
    "one long list": (_fill("workload w {\n  description = [", "]\n}\n", "1", ","), LIST_FACTOR),
    # the same list with a syntax error after it: lark explains, and must not build its tree
    "a long list, then a syntax error": (_fill("workload w {\n  description = [", "]]\n}\n", "1", ","),
                                         LIST_FACTOR),
    # a problem per line (262,000 duplicate keys): the first 1,000 reported, the rest counted (E006)
    "an error per line": (_fill("workload w {\n", "}\n", "a=1\n"), LIST_FACTOR),
}


#: every shape as text; the one with many diagnostics also as ``--json`` (it differs in those only)
#: lark reading 1 MiB to explain its syntax error takes ~6 s of CPU (slow); the others 1-2 s
RUNS = [pytest.param(shape, False, id=shape, marks=[pytest.mark.slow] if "syntax error" in shape else [])
        for shape in SHAPES] + [pytest.param("an error per line", True, id="an error per line, --json")]


@pytest.mark.parametrize("shape, json_out", RUNS)
def test_validate_of_a_file_at_the_cap_stays_within_the_documented_memory(shape, json_out, tmp_path):
    text, factor = SHAPES[shape]
    big = tmp_path / "big.wl"
    big.write_text(text, encoding="utf-8")
    size = big.stat().st_size
    assert MAX_SOURCE_BYTES - 8 <= size <= MAX_SOURCE_BYTES
    tiny = tmp_path / "tiny.wl"
    tiny.write_text("workload w { task pretrain { } model bert() target cpu { } }\n", encoding="utf-8")
    cp = subprocess.run([sys.executable, "-c", _CHILD, str(tiny), str(big), *(["--json"] if json_out else [])],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert cp.returncode == 0, cp.stderr[-3000:]
    got = json.loads(cp.stdout.splitlines()[-1])
    assert got["code"] == 1  # each shape is refused (a description is a string): diagnostics rendered too
    grew = (got["peak_kib"] - got["base_kib"]) * 1024
    assert grew <= factor * size, f"{shape}: {grew / 2**20:.1f} MB above the baseline for {size / 2**20:.2f} MiB " \
                                  f"(bound {factor}x = {factor * size / 2**20:.0f} MB)"


def test_the_string_terminal_takes_the_same_strings_as_the_alternation_it_replaced():
    """The possessive STRING (grammar/workload.lark, ``descent._STRING``) matches exactly what
    ``"([^"\\\\\\n]|\\\\.)*"`` matched: every text of up to 7 characters over quote, backslash,
    newline and a letter, whole and as a prefix."""
    import itertools
    import re

    from accelctl.dsl import descent

    before = re.compile(r'"([^"\\\n]|\\.)*"')
    for n in range(8):
        for chars in itertools.product('"\\\na', repeat=n):
            text = '"' + "".join(chars)
            old, new = before.match(text), descent._STRING.match(text)
            assert (old and old.end()) == (new and new.end()), repr(text)

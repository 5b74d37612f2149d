"""The CLI explains itself: every option of every verb has help, every verb has examples
that parse, and a bare ``accelctl`` opens the TUI on a terminal and prints the help in a
pipe (exit 0; it was a usage error, exit 2).  accelctl.cli.help."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

import pytest
from cli_pty import ROOT, in_pty

from accelctl.cli import build_parser
from accelctl.cli.help import EXAMPLES


def _verbs(parser) -> dict:
    return {None: parser, **parser.verbs}


def test_every_option_of_every_verb_has_help():
    missing = [f"{verb or 'accelctl'} {'/'.join(a.option_strings) or a.dest}"
               for verb, p in _verbs(build_parser()).items() for a in p.arguments
               if a.help != argparse.SUPPRESS and not (a.help or "").strip()]
    assert not missing, f"options without help: {missing}"


def test_every_verb_shows_examples_in_its_help():
    for verb, p in _verbs(build_parser()).items():
        text = p.format_help()
        assert "examples:" in text, f"{verb or 'accelctl'} --help shows no example"
        assert EXAMPLES[verb][0][0] in text


@pytest.mark.parametrize("verb", [v for v in EXAMPLES if v])
def test_each_example_parses(verb):
    """An example that the parser refuses teaches the wrong thing."""
    for command, _ in EXAMPLES[verb]:
        if "$(" in command or ">" in command:
            command = command.split("$(", 1)[-1].rstrip(')"').split(">")[0]
        argv = shlex.split(command)[1:]
        assert argv and argv[0] == verb, command
        build_parser().parse_args(argv)
        for word in argv:
            if word.endswith(".wl") and "*" not in word:
                assert (ROOT / word).is_file(), f"{command}: no {word}"


def test_help_fits_80_columns():
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    for verb in _verbs(build_parser()):
        argv = ([verb] if verb else []) + ["--help"]
        out = subprocess.run([sys.executable, "-m", "accelctl.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=60).stdout
        assert "examples:" in out
        long = [line for line in out.splitlines()[out.splitlines().index("examples:"):] if len(line) > 80]
        assert not long, f"{verb} --help examples wider than 80: {long}"


def test_bare_accelctl_in_a_pipe_prints_the_help_and_exits_0():
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: accelctl") and "examples:" in proc.stdout
    assert "error" not in proc.stderr


@pytest.mark.slow
def test_bare_accelctl_on_a_terminal_opens_the_tui(tmp_path):
    pytest.importorskip("textual")
    alternate_screen = b"\x1b[?1049h"
    code, out = in_pty([], env={"ACCELCTL_RUNS_DIR": str(tmp_path)}, keys=b"q", after=b"Workloads", timeout=90)
    assert alternate_screen in out and b"usage:" not in out, out[-2000:]
    assert code == 0

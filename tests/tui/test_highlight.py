"""The workload highlighter reads text with the grammar's own lexer and parser: every
token styled by its terminal or by the rule its NAME is in, plain after a syntax error."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.dsl.lalr import _PUNCT, lark_parser
from accelctl.tui.highlight import (
    _TERMINAL_STYLES,
    STYLES,
    highlight_workload,
    source_with_diagnostics,
)

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted([*(ROOT / "workloads").glob("*.wl"), *(ROOT / "tests" / "tui" / "fixtures" / "workloads").glob("*.wl")])


def styled(source: str) -> list[tuple[str, str]]:
    text = highlight_workload(source)
    return [(text.plain[s.start:s.end], str(s.style)) for s in text.spans]


def style_names(source: str) -> list[tuple[str, str]]:
    by_style = {v: k for k, v in STYLES.items()}
    return [(word, by_style[style]) for word, style in styled(source)]


def test_each_name_is_styled_by_its_rule():
    src = ('workload w {  # note\n'
           '  task generate { decoding = greedy }\n'
           '  model hf("a/b", dtype = bf16) { stand_in = gpt2(layers = [1, 2]) }\n'
           '  precision bf16\n'
           '  measure { warmup = 1 step  steps = 2 steps }\n'
           '}\n')
    assert style_names(src) == [
        ("workload", "block"), ("w", "name"), ("# note", "comment"),
        ("task", "block"), ("generate", "name"), ("decoding", "key"), ("greedy", "const"),
        ("model", "block"), ("hf", "call"), ('"a/b"', "string"), ("dtype", "key"), ("bf16", "const"),
        ("stand_in", "key"), ("gpt2", "call"), ("layers", "key"), ("1", "number"), ("2", "number"),
        ("precision", "block"), ("bf16", "const"),
        ("measure", "block"), ("warmup", "key"), ("1 step", "number"), ("steps", "key"), ("2 steps", "number"),
    ]


def test_the_lexer_decides_what_a_unit_is():
    # 'steps' before '=' is the next key, after a number it is the number's unit
    assert style_names("workload w { measure { warmup = 2  steps = 5 } }")[-4:] == [
        ("warmup", "key"), ("2", "number"), ("steps", "key"), ("5", "number")]
    assert style_names("workload w { steps = 5 steps  s = 1 s }")[-4:] == [
        ("steps", "key"), ("5 steps", "number"), ("s", "key"), ("1 s", "number")]


def test_a_fragment_is_read_as_the_inside_of_a_workload():
    assert style_names('target cpu { devices = 2 }  // trailing') == [
        ("target", "block"), ("cpu", "name"), ("devices", "key"), ("2", "number"), ("// trailing", "comment")]


@pytest.mark.parametrize("src,last", [
    ('workload w {\n  precision = }\n  model bert  # after\n}\n', ("precision", "key")),     # missing value
    ('workload w {\n  task pretrain\n  model hf("x\n  precision bf16\n}\n', ("hf", "call")),  # bad string
    ('workload w {\n  a = 1 }\n}\nb = 2\n', ("1", "number")),                               # stray '}'
    ('workload w {\n  a = 1 @ b = 2\n}\n', ("1", "number")),                                 # bad character
])
def test_text_after_a_syntax_error_is_plain(src, last):
    got = style_names(src)
    assert got[-1] == last


def test_an_unfinished_file_is_highlighted_to_its_end():
    assert style_names('workload w {\n  model hf("x", layers = 2')[-2:] == [("layers", "key"), ("2", "number")]
    assert style_names("") == [] and style_names("# only a comment") == [("# only a comment", "comment")]


def test_every_terminal_of_the_grammar_has_a_style_or_is_punctuation():
    parser = lark_parser()
    terminals = {t.name for t in parser.terminals} - set(parser.lexer_conf.ignore) - _PUNCT - {"NAME"}
    assert terminals == set(_TERMINAL_STYLES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_name_of_every_workload_file_gets_a_style(path):
    source = path.read_text(encoding="utf-8")
    parser = lark_parser()
    names = [t for t in parser.lex(source) if t.type in ("NAME", "WORKLOAD")]
    starts = {s.start for s in highlight_workload(source).spans}
    assert names
    for tok in names:
        assert tok.start_pos in starts, f"{path.name}:{tok.line}: {tok.value} not styled"


def test_diagnostics_inline_keep_the_highlighting_and_expand_tabs():
    out = source_with_diagnostics("workload w {\n\tprecision bf16\n}\n", [])
    line = out.plain.splitlines()[1]
    assert line.endswith("│     precision bf16")
    spans = {out.plain[s.start:s.end]: str(s.style) for s in out.spans}
    assert spans["precision"] == STYLES["block"] and spans["bf16"] == STYLES["const"]

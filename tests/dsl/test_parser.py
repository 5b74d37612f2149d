"""The parser: text -> AST with positions, or one positioned syntax diagnostic.

No torch here: the parser must stay importable and fast without the heavy stacks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.dsl import ast
from accelctl.dsl.parser import parse, parse_file
from accelctl.errors import Span, WorkloadError

SAMPLE = '''\
# a comment line
workload bloomz_latency {            // a C++-style comment too
  description = "BLOOMZ \\"latency\\" \\\\ tab:\\t"
  task generate {
    prompt         = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100 tokens
    kv_cache       = on
  }
  model hf("bigscience/bloomz-7b1") {
    stand_in = bloom(layers = 2, hidden = 64, heads = 4)
  }
  precision bf16
  measure { warmup = 2 steps  steps = 5 }
  target gaudi2 {
    devices  = 8
    price    = 13.11 usd/h
    memory   = 96 GB
    parallel = deepspeed_inference(tp = 8)
    hosts    = ["node-1", node-2, 3,]
  }
}
'''


def strip_spans(node):
    """The AST as plain tuples/dicts without positions (for shape comparisons)."""
    if hasattr(node, "_fields"):  # a node (a named tuple)
        out = {"_": type(node).__name__}
        for name in node._fields:
            if name.endswith("span") or name == "text" and isinstance(node, ast.Num):
                continue
            out[name] = strip_spans(getattr(node, name))
        return out
    if isinstance(node, tuple):
        return tuple(strip_spans(n) for n in node)
    return node


def render(item, indent: str = "") -> str:
    """Write an AST back as workload text (the inverse of parse, up to layout)."""
    if isinstance(item, ast.File):
        return "\n".join(render(w) for w in item.workloads)
    if isinstance(item, ast.Workload):
        body = "".join(render(i, "  ") for i in item.items)
        return f"workload {item.name} {{\n{body}}}\n"
    if isinstance(item, ast.Entry):
        return f"{indent}{item.key} = {ast.value_text(item.value)}\n"
    if isinstance(item, ast.Statement):
        return f"{indent}{item.key} {ast.value_text(item.value)}\n"
    if isinstance(item, ast.Block):
        head = f" {ast.value_text(item.header)}" if item.header is not None else ""
        body = "".join(render(i, indent + "  ") for i in item.items)
        return f"{indent}{item.kind}{head} {{\n{body}{indent}}}\n"
    raise TypeError(item)


def syntax_error(text: str):
    with pytest.raises(WorkloadError) as info:
        parse(text, "t.wl")
    (diag,) = info.value.diagnostics
    return diag


# ------------------------------------------------------------------ shapes

def test_parse_shapes():
    f = parse(SAMPLE, "sample.wl")
    assert f.path == "sample.wl" and f.text == SAMPLE
    (w,) = f.workloads
    assert w.name == "bloomz_latency"
    kinds = [(type(i).__name__, getattr(i, "key", getattr(i, "kind", None))) for i in w.items]
    assert kinds == [("Entry", "description"), ("Block", "task"), ("Block", "model"), ("Statement", "precision"),
                     ("Block", "measure"), ("Block", "target")]
    task, model, prec, measure, target = w.items[1:]
    assert task.header == ast.Word("generate", task.header.span)
    assert [e.key for e in task.items] == ["prompt", "max_new_tokens", "kv_cache"]
    assert isinstance(task.items[0].value, ast.Str)
    assert task.items[1].value.value == 100 and task.items[1].value.unit == "tokens"
    assert isinstance(task.items[2].value, ast.Word) and task.items[2].value.name == "on"
    assert isinstance(model.header, ast.Call) and model.header.name == "hf"
    assert model.header.args[0].value == "bigscience/bloomz-7b1"
    stand_in = model.items[0].value
    assert isinstance(stand_in, ast.Call) and stand_in.args == ()
    assert [(k.name, k.value.value) for k in stand_in.kwargs] == [("layers", 2), ("hidden", 64), ("heads", 4)]
    assert isinstance(prec, ast.Statement) and prec.value.name == "bf16"
    assert [(e.key, strip_spans(e.value)) for e in measure.items] == [
        ("warmup", {"_": "Quantity", "value": 2, "unit": "steps"}),
        ("steps", {"_": "Num", "value": 5}),
    ]
    values = {e.key: e.value for e in target.items}
    assert values["price"].value == 13.11 and values["price"].unit == "usd/h"
    assert values["memory"].value == 96 and values["memory"].unit == "GB"
    hosts = values["hosts"]
    assert isinstance(hosts, ast.ListV)  # trailing comma allowed
    assert [type(i).__name__ for i in hosts.items] == ["Str", "Word", "Num"]
    assert hosts.items[1].name == "node-2"


def test_round_trip_render_parse():
    first = parse(SAMPLE, "a.wl")
    again = parse(render(first), "b.wl")
    assert strip_spans(again.workloads) == strip_spans(first.workloads)


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[2].joinpath("workloads").glob("*.wl")),
                         ids=lambda p: p.name)
def test_round_trip_every_workload_file(path):
    first = parse_file(path)
    assert first.workloads, f"{path} holds no workload"
    again = parse(render(first))
    assert strip_spans(again.workloads) == strip_spans(first.workloads)


def test_empty_file_and_only_comments_parse_to_no_workloads():
    assert parse("").workloads == ()
    assert parse("# nothing\n// at all\n").workloads == ()


def test_several_workloads():
    f = parse("workload a { }\nworkload b {\n}\n")
    assert [w.name for w in f.workloads] == ["a", "b"]


# ------------------------------------------------------------------ spans

def test_spans_are_one_based_line_and_column():
    f = parse(SAMPLE)
    (w,) = f.workloads
    assert w.name_span == Span(2, 10, 2, 24)
    assert w.span.line == 2 and w.span.column == 1 and w.span.end_line == 21
    task = w.items[1]
    assert task.kind_span == Span(4, 3, 4, 7)
    assert task.header.span == Span(4, 8, 4, 16)
    prompt = task.items[0]
    assert prompt.key_span == Span(5, 5, 5, 11)
    assert prompt.value.span == Span(5, 22, 5, 65)
    assert prompt.span == Span(5, 5, 5, 65)
    tokens = task.items[1].value
    assert tokens.span == Span(6, 22, 6, 32)  # the quantity covers number and unit
    model = w.items[2]
    assert model.header.name_span == Span(9, 9, 9, 11)
    stand_in = model.items[0].value
    assert stand_in.kwargs[1].span == Span(10, 34, 10, 45)
    assert stand_in.kwargs[1].value.span == Span(10, 43, 10, 45)
    prec = w.items[3]
    assert prec.key_span == Span(12, 3, 12, 12) and prec.value.span == Span(12, 13, 12, 17)


def test_spans_after_comments_and_blank_lines():
    text = "\n\n# c\nworkload w { # trailing\n\n    x = 1  // c\n}\n"
    (w,) = parse(text).workloads
    assert w.span.line == 4
    assert w.items[0].key_span == Span(6, 5, 6, 6)
    assert w.items[0].value.span == Span(6, 9, 6, 10)


# ------------------------------------------------------------------ values and units

@pytest.mark.parametrize("literal, value", [
    ("100", 100), ("65_000", 65000), ("-3", -3), ("+2", 2), ("0.0015", 0.0015), ("1e-3", 1e-3), (".5", 0.5),
    ("2.", 2.0), ("1E+2", 100.0),
])
def test_numbers(literal, value):
    (w,) = parse(f"workload w {{ x = {literal} }}").workloads
    num = w.items[0].value
    assert isinstance(num, ast.Num) and num.value == value and type(num.value) is type(value)
    assert num.text == literal


@pytest.mark.parametrize("unit", [
    "usd/h", "usd/hr", "$/h", "usd", "steps", "step", "tokens", "token", "samples", "sample", "sequences", "images",
    "epochs", "epoch", "TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "KB", "Tbps", "Gbps", "Mbps", "PFLOPS",
    "TFLOPS", "GFLOPS", "min", "ms", "us", "s", "h", "B",
])
def test_every_unit_makes_a_quantity(unit):
    (w,) = parse(f"workload w {{ x = 3 {unit} }}").workloads
    q = w.items[0].value
    assert isinstance(q, ast.Quantity) and (q.value, q.unit) == (3, unit)


def test_unit_may_touch_the_number():
    (w,) = parse("workload w { m = 96GB  p = 32.77usd/h }").workloads
    assert [(e.value.value, e.value.unit) for e in w.items] == [(96, "GB"), (32.77, "usd/h")]


def test_unit_word_followed_by_equals_is_the_next_key():
    # `steps` is a unit after a number, but `steps =` starts the next entry
    for text in ("workload w { warmup = 2 steps = 5 }", "workload w { warmup = 2\n steps = 5 }"):
        (w,) = parse(text).workloads
        assert [(e.key, type(e.value).__name__) for e in w.items] == [("warmup", "Num"), ("steps", "Num")]
    (w,) = parse("workload w { warmup = 2 steps steps = 5 }").workloads
    assert [(e.key, type(e.value).__name__) for e in w.items] == [("warmup", "Quantity"), ("steps", "Num")]


def test_unit_words_are_names_where_no_number_precedes():
    (w,) = parse("workload w { s = h  B = [GB] }").workloads
    assert w.items[0].key == "s" and w.items[0].value == ast.Word("h", w.items[0].value.span)
    assert w.items[1].value.items[0].name == "GB"


def test_names_with_dots_and_dashes():
    (w,) = parse("workload w { instance = p4d.24xlarge  host = node-01 }").workloads
    assert [e.value.name for e in w.items] == ["p4d.24xlarge", "node-01"]


# ------------------------------------------------------------------ comments and strings

def test_comments_are_ignored_everywhere_but_in_strings():
    text = '''# top
workload w {   # after a brace
  // a line comment
  a = "not # a comment"   # but this is
  b = "nor // this"       // and this is
  c = f(x = 1,  # inside a call
        y = 2)
}
'''
    (w,) = parse(text).workloads
    assert [e.key for e in w.items] == ["a", "b", "c"]
    assert w.items[0].value.value == "not # a comment"
    assert w.items[1].value.value == "nor // this"
    assert [k.name for k in w.items[2].value.kwargs] == ["x", "y"]


@pytest.mark.parametrize("literal, value", [
    (r'"plain"', "plain"),
    (r'"quote \" inside"', 'quote " inside'),
    (r'"back\\slash"', "back\\slash"),
    (r'"new\nline and\ttab"', "new\nline and\ttab"),
    (r'"unknown \q escape"', "unknown q escape"),
    (r'""', ""),
    ('"unicode: ü → 日本"', "unicode: ü → 日本"),
])
def test_strings_with_escapes(literal, value):
    (w,) = parse(f"workload w {{ s = {literal} }}").workloads
    s = w.items[0].value
    assert isinstance(s, ast.Str) and s.value == value
    # value_text writes it back so that it parses to the same string
    (w2,) = parse(f"workload w {{ s = {ast.value_text(s)} }}").workloads
    assert w2.items[0].value.value == value


def test_nothing_is_evaluated():
    # a value that looks like code stays a string or a call shape
    (w,) = parse('workload w { x = "__import__(\'os\').system(\'true\')"  y = os(system = "rm") }').workloads
    assert isinstance(w.items[0].value, ast.Str)
    assert isinstance(w.items[1].value, ast.Call) and w.items[1].value.name == "os"


# ------------------------------------------------------------------ syntax diagnostics

SYNTAX_CASES = [
    # code, text, (line, column), message fragment
    ("E100", "workload w {\n  x = 1 )\n}\n", (2, 9), "stray ')'"),
    ("E100", "workload w {\n  x = = 3\n}\n", (2, 7), "stray '='"),
    ("E100", "workload w {\n  5 = 3\n}\n", (2, 3), "unexpected number '5'"),
    ("E100", "workload w", (1, 10), "unexpected end of file"),
    ("E101", "workload w {\n  task generate {\n    max_new_tokens = 1\n}\n", (1, 12), "missing '}'"),
    ("E101", "workload a {\n  measure {\n}\nworkload b {\n}\n", (1, 12), "before the next workload"),
    ("E102", 'workload w {\n  prompt = "never closed\n}\n', (2, 12), "unterminated string"),
    ("E102", "workload w {\n  prompt = 'single'\n}\n", (2, 12), "double quotes"),
    ("E103", "workload w {\n  steps 5\n}\n", (2, 9), "missing '='"),
    ("E103", 'workload w {\n  prompt "hi"\n}\n', (2, 10), "missing '='"),
    ("E104", "workload w {\n  x = 1 @ 2\n}\n", (2, 9), "unexpected character '@'"),
    ("E105", "workload w {\n  x =\n}\n", (3, 1), "missing value"),
    ("E105", "workload w {\n  x = f(a = )\n}\n", (2, 13), "missing value"),
    ("E106", "precision bf16\n", (1, 1), "at top level"),
    ("E106", "workload w { }\nx = 1\n", (2, 1), "at top level"),
    ("E107", "workload w {\n}\n}\n", (3, 1), "unmatched '}'"),
    ("E108", "workload w {\n  x = f(a GB)\n}\n", (2, 11), "unit 'GB' without a number"),
]


@pytest.mark.parametrize("code, text, pos, fragment", SYNTAX_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(SYNTAX_CASES)])
def test_syntax_diagnostic(code, text, pos, fragment):
    d = syntax_error(text)
    assert d.code == code
    assert (d.span.line, d.span.column) == pos
    assert fragment in d.message
    assert d.path == "t.wl"
    assert d.severity == "error"
    # rendered with file:line:col, the source line and a caret
    out = d.render()
    assert out.startswith(f"t.wl:{pos[0]}:{pos[1]}: error[{code}]: ")
    assert text.splitlines()[pos[0] - 1].rstrip() in out
    assert "^" in out


@pytest.mark.parametrize("code", ["E101", "E102", "E103", "E104", "E105", "E106", "E107", "E108"])
def test_syntax_diagnostics_with_a_fix_have_a_hint(code):
    for c, text, _, _ in SYNTAX_CASES:
        if c == code:
            assert syntax_error(text).hint, f"{code} has no hint"


def test_every_syntax_code_is_covered():
    assert {c for c, *_ in SYNTAX_CASES} == {f"E10{i}" for i in range(9)}


def test_missing_equals_hint_names_the_key():
    assert syntax_error("workload w {\n  steps 5\n}\n").hint == "write 'steps = 5'"


def test_missing_brace_points_at_the_innermost_open_block():
    d = syntax_error("workload w {\n  task pretrain { }\n  target cpu {\n    devices = 1\n")
    assert d.code == "E101" and (d.span.line, d.span.column) == (3, 14)


def test_unterminated_string_caret_spans_the_rest_of_the_line():
    d = syntax_error('workload w {\n  prompt = "abc\n}\n')
    assert d.span == Span(2, 12, 2, 16)


def test_e001_no_such_file(tmp_path):
    missing = tmp_path / "nope.wl"
    with pytest.raises(WorkloadError) as info:
        parse_file(missing)
    (d,) = info.value.diagnostics
    assert d.code == "E001" and d.span is None and d.path == str(missing)
    assert d.render().startswith(f"{missing}: error[E001]: no such file")
    assert d.hint


def test_e002_unreadable_file(tmp_path):
    bad = tmp_path / "latin1.wl"
    bad.write_bytes(b"workload w { x = \"\xff\" }\n")
    with pytest.raises(WorkloadError) as info:
        parse_file(bad)
    assert [d.code for d in info.value.diagnostics] == ["E002"]
    with pytest.raises(WorkloadError) as info:
        parse_file(tmp_path)  # a directory
    assert [d.code for d in info.value.diagnostics] == ["E002"]


def test_parse_file_reads_and_keeps_the_path(tmp_path):
    p = tmp_path / "ok.wl"
    p.write_text("workload w { }\n", encoding="utf-8")
    f = parse_file(p)
    assert f.path == str(p) and [w.name for w in f.workloads] == ["w"]


# ------------------------------------------------------------------ lark, the one parser

def test_the_packaged_grammar_is_the_grammar():
    """One source of truth: the wheel's ``accelctl/_grammar/workload.lark`` is a link to
    ``grammar/workload.lark`` (tests/test_packaging.py checks the wheel holds its bytes)."""
    root = Path(__file__).resolve().parents[2]
    packaged = root / "accelctl" / "_grammar" / "workload.lark"
    assert packaged.is_symlink() and packaged.resolve() == (root / "grammar" / "workload.lark").resolve()


def _nodes(node):
    """Every AST node under ``node`` (itself included) that has a span."""
    if isinstance(node, tuple) and hasattr(node, "span"):
        yield node
    if isinstance(node, tuple):
        for child in node:
            if isinstance(child, tuple) and not isinstance(child, Span):
                yield from _nodes(child)


def test_every_node_of_every_shipped_workload_spans_its_own_text():
    """Each node's span runs from its first token to its last: a workload from the keyword to
    its '}', a block from its kind to its '}', a call from its name to its ')', a list
    from '[' to ']', an entry from its key to its value's end."""
    root = Path(__file__).resolve().parents[2]
    for wl in sorted((root / "workloads").glob("*.wl")):
        text = wl.read_text(encoding="utf-8")
        lines = text.split("\n")

        def at(span):
            if span.line == span.end_line:
                return lines[span.line - 1][span.column - 1:span.end_column - 1]
            inner = lines[span.line:span.end_line - 1]
            return "\n".join([lines[span.line - 1][span.column - 1:], *inner, lines[span.end_line - 1][:span.end_column - 1]])

        file = parse(text, str(wl))
        assert file.workloads, wl.name
        seen = set()
        for w in file.workloads:
            for node in _nodes(w):
                seen.add(type(node).__name__)
                got = at(node.span)
                if isinstance(node, (ast.Workload, ast.Block)):
                    assert got.endswith("}"), (wl.name, node.span, got[-40:])
                if isinstance(node, ast.Workload):
                    assert got.startswith("workload ") and at(node.name_span) == node.name
                if isinstance(node, ast.Block):
                    assert got.startswith(node.kind) and at(node.kind_span) == node.kind
                if isinstance(node, (ast.Entry, ast.Statement)):
                    assert at(node.key_span) == node.key and got.endswith(at(node.value.span)), (wl.name, got)
                if isinstance(node, ast.Call):
                    assert got.startswith(node.name) and got.endswith(")") and at(node.name_span) == node.name
                if isinstance(node, ast.ListV):
                    assert got.startswith("[") and got.endswith("]")
                if isinstance(node, ast.Num):
                    assert got == node.text
                if isinstance(node, (ast.Word,)):
                    assert got == node.name
        assert {"Workload", "Block", "Entry", "Word"} <= seen, wl.name


def test_spans_of_brackets_across_lines_end_at_the_closing_bracket():
    text = "workload w {\n  x = [\n    1,\n    2,\n  ]\n  m hf(\n  \"a\",\n  k = 2 steps\n)\n}\n"
    (w,) = parse(text).workloads
    entry, statement = w.items
    assert w.span == Span(1, 1, 10, 2)
    assert entry.value.span == Span(2, 7, 5, 4) and entry.span == Span(2, 3, 5, 4)
    assert [i.value for i in entry.value.items] == [1, 2]
    call = statement.value
    assert call.span == Span(6, 5, 9, 2) and call.name_span == Span(6, 5, 6, 7)
    assert call.kwargs[0].span == Span(8, 3, 8, 14) and call.kwargs[0].value.span == Span(8, 7, 8, 14)


def test_a_syntax_error_in_a_late_workload_is_positioned_in_the_file():
    """lark reads from the failing workload only (what precedes it blanked): same position."""
    good = "workload a {\n  x = 1\n}\n" * 50
    with pytest.raises(WorkloadError) as info:
        parse(good + "workload b {\n  x = 1 )\n}\n")
    d = info.value.diagnostics[0]
    assert (d.code, d.span.line, d.span.column) == ("E100", 152, 9)
    assert d.source_line == "  x = 1 )"


@pytest.mark.parametrize("text, pos, hint", [
    ("workloadfoo { }", (1, 1, 12), "did you mean `workload foo`?"),
    ("workload a { }\nworkloadfoo { }", (2, 1, 12), "did you mean `workload foo`?"),
    ("# c\n  workload_x {\n}", (2, 3, 13), "did you mean `workload _x`?"),
    ("workload a { }\nworkload b { }\nworkloadb.c { }", (3, 1, 12), "did you mean `workload b.c`?"),
    ("workload1 { }", (1, 1, 10), "put a space between `workload` and"),
    ("workload-x { }", (1, 1, 11), "put a space between `workload` and"),
])
def test_the_keyword_glued_to_a_name_is_an_error_with_a_hint(text, pos, hint):
    """``workloadfoo { }`` was the workload ``foo`` at the start of a file (a lexer accident
    the hand-written parser copied) and an error after a workload: now an error (E106) at the
    glued word, wherever it is, with the fix as its hint."""
    with pytest.raises(WorkloadError) as info:
        parse(text)
    d = info.value.diagnostics[0]
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == ("E106", *pos)
    assert d.hint.startswith(hint), d.hint
    assert "workload" in d.render()


def test_the_keyword_apart_from_its_name_still_opens_a_workload():
    assert [w.name for w in parse("workload\tfoo{}workload\nbar # c\n{ }").workloads] == ["foo", "bar"]
    assert parse("workload w { workloads = 1 }").workloads[0].items[0].key == "workloads"


def test_workload_right_after_a_closing_brace_is_the_keyword_even_inside_a_block():
    """After '}' lark's lexer knows the keyword: a key 'workload' there is the next workload
    (E101), while after '{' it is a plain key.  Found by the fuzz test."""
    assert parse("workload w { workload = 1 }").workloads[0].items[0].key == "workload"
    with pytest.raises(WorkloadError) as info:
        parse("workload w {\n  batch { micro = 1 }\nworkload v {\n}\n")
    assert info.value.diagnostics[0].code == "E101"

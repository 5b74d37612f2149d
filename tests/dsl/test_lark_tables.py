"""lark's parser tables ship with the package as JSON data (``accelctl.dsl.lark_tables``): they
are this grammar's, parse every text as tables analysed now do, and nothing of lark's is ever
read from, or written to, the user's cache folder (a pickle there would be code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lark
import pytest

from accelctl.dsl import lalr, lark_tables
from accelctl.dsl.grammar import grammar_text
from accelctl.errors import WorkloadError
from tests.golden_files import VARIABLE, updating

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ["workload a {\n  steps = 3\n", "workload a { x 3 }", "workloadfoo { }", "workload a { a = [1, 2 }",
          "workload a { model vit(depth = ) }", "}", "workload a { s = \"open }", "workload a { t = 3 GiB x }",
          "workload a { b { c = 1e999 } }", "workload a {\n  modelvit(depth = 2)\n}"]


def test_the_shipped_tables_are_the_grammars():
    """Built from this grammar text and lark version (else every process analyses the grammar
    again): after a grammar change, ``python -m accelctl.dsl.lark_tables`` or the golden rule."""
    stored = json.loads(lark_tables.tables_path().read_text(encoding="utf-8"))
    fresh = {k: stored.get(k) for k in ("grammar_sha256", "lark")}
    if fresh != lark_tables._stamp() and updating():
        lark_tables.write()
        lark_tables.load.cache_clear()
        return
    assert fresh == lark_tables._stamp(), (f"{lark_tables.tables_path()} is stale: run "
                                           f"`python -m accelctl.dsl.lark_tables` (or the suite with {VARIABLE}=1)")
    assert lark_tables.load() is not None


def _outcome(parser: lark.Lark, text: str) -> object:
    try:
        return parser.parse(text)
    except lark.exceptions.UnexpectedInput as exc:
        return type(exc).__name__, exc.line, exc.column, sorted(getattr(exc, "expected", None) or ())


def test_the_shipped_tables_parse_as_tables_analysed_now():
    analysed = lark.Lark(grammar_text(), **lark_tables.OPTIONS)
    shipped = lark_tables.parser()
    assert lark_tables.load() is not None
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "workloads").glob("*.wl"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "bench" / "workloads").glob("*.wl"))]
    assert len(texts) > 10
    for text in texts + BROKEN:
        assert _outcome(shipped, text) == _outcome(analysed, text), text[:60]


@pytest.mark.parametrize("content", [b"", b"not json", b'{"grammar_sha256": "0", "lark": "1"}',
                                     b"[1, 2]", b'{"data": {"(": 3}}'])
def test_tables_that_are_not_this_grammars_are_analysed_again(tmp_path, monkeypatch, content):
    stamp = lark_tables._stamp()
    bad = tmp_path / "workload.tables.json"
    bad.write_bytes(content if b"(" not in content else json.dumps({**stamp, "data": {"(": 3}, "memo": {}}).encode())
    monkeypatch.setattr(lark_tables, "tables_path", lambda: bad)
    lark_tables.load.cache_clear()
    try:
        assert lark_tables.load() is None
        assert lark_tables.parser().parse("workload a { }").data == "start"
    finally:
        lark_tables.load.cache_clear()


_PLANT = """
import os, pickle, sys
class Boom:
    def __reduce__(self):
        return (os.system, ("touch " + sys.argv[1],))
with open(sys.argv[2], "wb") as f:
    f.write(b"0" * 64 + b"\\n")
    pickle.dump(Boom(), f)
    pickle.dump(Boom(), f)
"""


def test_nothing_in_the_cache_folder_is_unpickled_or_written_by_lark(tmp_path):
    """A pickle planted where lark's own cache used to be (and one under every name a lark cache
    takes) never runs: the parser takes no file from the user's folders."""
    cache = tmp_path / "cache" / "accelctl"
    cache.mkdir(parents=True)
    pwned = tmp_path / "PWNED"
    names = [f"workload-grammar-{h}-lark{lark.__version__}.cache" for h in ("0" * 16, _grammar_digest())]
    for name in names:
        subprocess.run([sys.executable, "-c", _PLANT, str(pwned), str(cache / name)], check=True)
    workload = tmp_path / "fresh.wl"
    workload.write_text("workload fresh {\n  steps = 3\n", encoding="utf-8")  # a syntax error: lark runs
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), ACCELCTL_PARSE_CACHE="off",
               TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", "validate", str(workload)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "E101" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert not pwned.exists()
    assert sorted(p.name for p in cache.iterdir()) == sorted(names)  # nothing written beside them
    assert not list(tmp_path.glob(".lark_*"))  # nor lark's own temporary-folder cache


def _grammar_digest() -> str:
    import hashlib

    return hashlib.sha256(grammar_text().encode("utf-8")).hexdigest()[:16]


def test_both_parsers_come_from_the_shipped_tables():
    assert lark_tables.load() is not None
    with pytest.raises(WorkloadError) as err:
        lalr.parse_text("workload a {\n  steps = 3\n", "bad.wl")
    assert err.value.diagnostics[0].code == "E101"
    assert [t.type for t in lalr.lark_parser().lex("workload a { }")] == ["WORKLOAD", "NAME", "LBRACE", "RBRACE"]

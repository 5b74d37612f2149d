"""The parsed-workload cache (``accelctl.dsl.parse_cache``): a file's parse read back is the
parse, spans and types included; anything else about an entry -- another text, another grammar
or parser, a corrupt, truncated, foreign or unreadable entry, a folder that cannot be written --
costs only the cache: the text is parsed again and nothing else changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.dsl import ast, parse_cache
from accelctl.dsl.lalr import parse_text
from accelctl.dsl.parser import parse, parse_file
from accelctl.dsl.source import MAX_SOURCE_BYTES
from accelctl.errors import WorkloadError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*(ROOT / "workloads").glob("*.wl"), *(ROOT / "bench" / "workloads").glob("*.wl")])
GOOD = "workload w {\n  task pretrain { steps = 3 }\n  model gpt2(layers = 2, hidden = 64)\n  target cpu { devices = 1 }\n}\n"


@pytest.fixture(autouse=True)
def cache_in(tmp_path, monkeypatch) -> Path:
    where = tmp_path / "parsed"
    monkeypatch.setenv(parse_cache.ENV, str(where))
    parse_cache.fingerprint.cache_clear()
    yield where
    parse_cache.fingerprint.cache_clear()


def typed(node):
    """The AST as nested tuples naming every value's type: equal only where the nodes, their
    spans and the types of their values (an int is not a float) are."""
    if isinstance(node, tuple):
        return (type(node).__name__, tuple(typed(x) for x in node))
    return (type(node).__name__, node)


def workload_file(tmp_path: Path, text: str = GOOD, name: str = "w.wl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def entries(where: Path) -> list[Path]:
    """The entries (the folder's secret apart)."""
    return sorted(p for p in where.glob("*") if p.name != parse_cache.KEY_FILE) if where.is_dir() else []


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_hit_is_the_parse_spans_and_types_included(path, cache_in):
    fresh = parse_text(path.read_text(encoding="utf-8"), str(path))
    first = parse_file(path)  # parses and stores
    assert len(entries(cache_in)) == 1
    read_back = parse_cache.load(str(path), path.read_text(encoding="utf-8"))
    assert read_back is not None  # a hit
    assert typed(read_back) == typed(fresh) == typed(first.workloads)
    second = parse_file(path)
    assert typed(second.workloads) == typed(fresh) and second.text == first.text and second.path == str(path)


def test_a_hit_does_not_parse(tmp_path, monkeypatch):
    path = workload_file(tmp_path)
    parse_file(path)
    from accelctl.dsl import lalr

    def refuse(text, path):
        raise AssertionError("parsed again")

    monkeypatch.setattr(lalr, "parse_text", refuse)
    assert parse_file(path).workloads[0].name == "w"


def test_one_changed_byte_is_a_miss(tmp_path, cache_in):
    path = workload_file(tmp_path)
    parse_file(path)
    changed = GOOD.replace("steps = 3", "steps = 4")
    assert parse_cache.load(str(path), changed) is None
    path.write_text(changed, encoding="utf-8")
    steps = parse_file(path).workloads[0].items[0].items[0].value
    assert (steps.value, steps.text) == (4, "4")
    assert parse_cache.load(str(path), changed) is not None and len(entries(cache_in)) == 1  # replaced


@pytest.mark.parametrize("which", range(6))
def test_what_the_parse_depends_on_is_in_the_key(tmp_path, monkeypatch, which):
    """The grammar, lark (its ``__init__`` holds ``__version__``), the AST, the parser, the cache
    and ``Span``'s module: one byte changed in any of them is a miss."""
    real = parse_cache.depends_on()
    import lark

    assert real[0].name == "workload.lark" and f'"{lark.__version__}"' in real[1].read_text()
    assert [p.name for p in real[2:]] == ["ast.py", "lalr.py", "parse_cache.py", "errors.py"]
    copies = []
    for i, file in enumerate(real):
        copy = tmp_path / f"{i}-{file.name}"
        copy.write_bytes(file.read_bytes())
        copies.append(copy)
    monkeypatch.setattr(parse_cache, "depends_on", lambda: copies)
    path = workload_file(tmp_path)
    parse_file(path)
    assert parse_cache.load(str(path), GOOD) is not None
    copies[which].write_bytes(copies[which].read_bytes() + b" ")
    parse_cache.fingerprint.cache_clear()
    assert parse_cache.load(str(path), GOOD) is None


def test_a_missing_dependency_turns_the_cache_off(tmp_path, monkeypatch, cache_in):
    monkeypatch.setattr(parse_cache, "depends_on", lambda: [tmp_path / "gone.py"])
    path = workload_file(tmp_path)
    assert parse_file(path).workloads[0].name == "w"
    assert entries(cache_in) == []


def _entry(cache_in: Path) -> Path:
    (entry,) = entries(cache_in)
    return entry


def _forged(payload: object) -> bytes:
    """An entry for GOOD with the right key and payload hash around ``payload``."""
    data = parse_cache._encoded(payload)
    return parse_cache.MAGIC + parse_cache.key(GOOD) + parse_cache._digest(data) + data


def _damaged(whole: bytes) -> list[bytes]:
    head = len(parse_cache.MAGIC)
    flipped = bytearray(whole)
    flipped[-3] ^= 0x01  # a bit of the payload: its hash no longer matches
    cut_key = bytearray(whole)
    cut_key[head] ^= 0x80
    plain = json.loads(whole[head + 64:])
    return [b"", b"garbage\n" * 10, whole[:5], whole[:head + 10], whole[:head + 64], whole[:-1], whole[:len(whole) // 2],
            bytes(flipped), bytes(cut_key), b"accelctl-parsed-0\n" + whole[head:],  # another layout
            whole + b"trailing",
            _forged(((plain[0][0], ((99, "x", 1, 1, 1, 2),), *plain[0][2:]),)),  # an unknown tag
            _forged(((plain[0][0], plain[0][1], 1, 1, 1),)),  # a span of three
            _forged(((plain[0][0], plain[0][1], 1.0, *plain[0][3:]),)),  # a line that is not an int
            _forged(((1.5, plain[0][1], *plain[0][2:]),)),  # a name that is not a str
            _forged(((plain[0][0], ((3, ["a", "list"], 1, 1, 1, 2),), *plain[0][2:]),)),
            _forged(("print('ran')",)),  # text where a workload goes: never run
            _forged({"a": 1}), _forged(None)]


def test_a_damaged_or_foreign_entry_is_parsed_again(tmp_path, cache_in, capfd):
    path = workload_file(tmp_path)
    fresh = typed(parse_file(path).workloads)
    entry = _entry(cache_in)
    whole = entry.read_bytes()
    for i, bad in enumerate(_damaged(whole)):
        entry.write_bytes(bad)
        assert parse_cache.load(str(path), GOOD) is None, i
        assert typed(parse_file(path).workloads) == fresh, i
        assert parse_cache.load(str(path), GOOD) is not None, i  # and written again, whole
    assert capfd.readouterr() == ("", "")


def test_an_unreadable_entry_is_parsed_again(tmp_path, cache_in):
    path = workload_file(tmp_path)
    fresh = typed(parse_file(path).workloads)
    entry = _entry(cache_in)
    entry.unlink()
    entry.mkdir()  # a folder where the entry goes: cannot be read nor replaced
    assert typed(parse_file(path).workloads) == fresh
    assert entry.is_dir() and [p.name for p in entries(cache_in)] == [entry.name]  # no leftover


def test_a_link_or_leftover_where_an_entry_is_written_is_never_written_through(tmp_path, cache_in):
    """The entry is written into a new file of this writer's own, then renamed into place: a
    file or a symbolic link already at that name (a crash's leftover, or planted) is not
    written into nor followed; it is removed, and the next parse keeps its entry."""
    import threading

    path = workload_file(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("not to be overwritten")
    entry = parse_cache.entry_path(str(path), cache_in)
    cache_in.mkdir()
    tmp = entry.with_name(f"{entry.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.symlink_to(victim)
    assert parse_file(path).workloads[0].name == "w"
    assert victim.read_text() == "not to be overwritten" and not tmp.is_symlink() and not entry.exists()
    parse_file(path)
    assert parse_cache.load(str(path), GOOD) is not None


def test_a_cache_folder_that_cannot_be_written_costs_only_the_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("where the folder would go")
    monkeypatch.setenv(parse_cache.ENV, str(blocker / "parsed"))
    path = workload_file(tmp_path)
    assert typed(parse_file(path).workloads) == typed(parse_text(GOOD, str(path)))
    assert blocker.read_text() == "where the folder would go"


@pytest.mark.skipif(os.geteuid() == 0, reason="not run: root writes into a read-only folder")
def test_a_read_only_cache_folder_costs_only_the_cache(tmp_path, cache_in):
    cache_in.mkdir()
    cache_in.chmod(0o555)
    try:
        path = workload_file(tmp_path)
        assert typed(parse_file(path).workloads) == typed(parse_text(GOOD, str(path)))
        assert entries(cache_in) == []
    finally:
        cache_in.chmod(0o755)


def test_a_full_disk_costs_only_the_cache(tmp_path, cache_in):
    """Writes past 100 bytes fail (``RLIMIT_FSIZE``: EFBIG, as a full disk's ENOSPC would): the
    parse is the parse and no partial entry is left behind."""
    path = workload_file(tmp_path)
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "from accelctl.dsl.lalr import ast_parser\n"
            "ast_parser()  # lark's tables: read, or written before the limit\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))\n"
            "from accelctl.dsl.parser import parse_file\n"
            f"print(parse_file({str(path)!r}).workloads[0].name)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{parse_cache.ENV: str(cache_in)})
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "w\n", "")
    assert entries(cache_in) == []


@pytest.mark.parametrize("text, code", [("workload w {\n  steps = 3\n", "E101"),
                                        ("workload w { x = 1e999 }\n", "E003"),
                                        ("workload w { x = " + "[" * 200 + " }\n", "E005")])
def test_a_file_with_errors_is_not_cached(tmp_path, cache_in, text, code):
    path = workload_file(tmp_path, text)
    for _ in range(2):
        with pytest.raises(WorkloadError) as err:
            parse_file(path)
        assert err.value.diagnostics[0].code == code
    assert entries(cache_in) == []


def test_an_edit_that_breaks_a_cached_file_gets_its_exact_diagnostic(tmp_path):
    path = workload_file(tmp_path)
    parse_file(path)
    path.write_text(GOOD.replace("steps = 3", "steps 3 ="), encoding="utf-8")
    with pytest.raises(WorkloadError) as cached_err:
        parse_file(path)
    with pytest.raises(WorkloadError) as fresh_err:
        parse(path.read_text(encoding="utf-8"), str(path))
    assert cached_err.value.diagnostics == fresh_err.value.diagnostics


def test_the_size_cap_comes_first(tmp_path, cache_in):
    text = "# " + "x" * MAX_SOURCE_BYTES + "\n" + GOOD
    with pytest.raises(WorkloadError) as err:
        parse(text, str(tmp_path / "big.wl"), cached=True)
    assert err.value.diagnostics[0].code == "E004"
    assert entries(cache_in) == []


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(parse_cache.ENV, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    parse_file(workload_file(tmp_path))
    assert not (tmp_path / "xdg").exists()


def test_by_default_it_is_the_user_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(parse_cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = workload_file(tmp_path)
    parse_file(path)
    assert [p.suffix for p in entries(tmp_path / "xdg" / "accelctl" / "parsed")] == [".ast"]


def test_a_text_parsed_without_cached_is_not_kept(tmp_path, cache_in):
    parse(GOOD, str(tmp_path / "w.wl"))
    assert entries(cache_in) == []


def test_the_oldest_entries_go_past_the_limit(tmp_path, monkeypatch, cache_in):
    monkeypatch.setattr(parse_cache, "MAX_ENTRIES", 4)
    paths = [workload_file(tmp_path, GOOD, f"w{i}.wl") for i in range(6)]
    for i, path in enumerate(paths):
        parse_file(path)
        os.utime(parse_cache.entry_path(str(path), cache_in), ns=(i * 10**9, i * 10**9))  # in order of age
    left = {p.name for p in entries(cache_in)}
    assert len(left) <= 4 and parse_cache.entry_path(str(paths[-1]), cache_in).name in left
    assert parse_cache.entry_path(str(paths[0]), cache_in).name not in left


def test_a_large_text_is_parsed_every_time(tmp_path, cache_in):
    path = workload_file(tmp_path, "# " + "x" * parse_cache.MAX_CACHED_BYTES + "\n" + GOOD)
    assert parse_file(path).workloads[0].name == "w"
    assert entries(cache_in) == []


def test_an_entry_holds_only_plain_values(tmp_path, cache_in):
    path = SHIPPED[0]
    parse_file(path)
    plain = json.loads(_entry(cache_in).read_bytes()[len(parse_cache.MAGIC) + 64:])

    def kinds(x):
        return {type(x)}.union(*(kinds(y) for y in x)) if isinstance(x, list) else {type(x)}

    assert kinds(plain) <= {list, str, int, float, type(None)}
    assert isinstance(parse_file(path), ast.File)


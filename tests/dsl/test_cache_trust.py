"""A cache is data, trusted only where only this user can write (``accelctl.private_files``):
a parsed-workload entry can never change a verdict, a FIFO or a link at an entry's path is a
miss (never a wait), a folder others could write is not used (one warning, the command works
uncached), and the folders accelctl makes are 0700 whatever the umask."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import private_files
from accelctl.dsl import parse_cache
from accelctl.dsl.lalr import parse_text
from accelctl.dsl.parser import parse_file

ROOT = Path(__file__).resolve().parents[2]
GOOD = ("workload w {\n  task pretrain { train_steps = 3 }\n  model gpt2(layers = 2, hidden = 64)\n"
        "  dataset synthetic(seq_len = 16 tokens)\n  optimizer adamw(lr = 0.001)\n  target cpu { devices = 1 }\n}\n")
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="not run: giving a folder to another user needs root")


@pytest.fixture(autouse=True)
def cache_in(tmp_path, monkeypatch) -> Path:
    where = tmp_path / "parsed"
    monkeypatch.setenv(parse_cache.ENV, str(where))
    parse_cache.fingerprint.cache_clear()
    private_files._warned.clear()
    private_files.take_warnings()
    yield where
    parse_cache.fingerprint.cache_clear()


def _cli(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def _entry(where: Path, path: Path, text: str, workloads, keyed: bool = True) -> None:
    """Write an entry under ``text``'s key holding ``workloads``: its hash keyed with the folder's
    secret as accelctl writes it (``keyed``), or an unkeyed hash, as anyone could compute it."""
    payload = parse_cache._encoded(tuple(parse_cache._plain_workload(w) for w in workloads))
    _write(where, path, text, payload, keyed)


def _write(where: Path, path: Path, text: str, payload: bytes, keyed: bool = True) -> None:
    where.mkdir(mode=0o700, exist_ok=True)
    digest = (parse_cache._mac(payload, parse_cache._secret(str(where), create=True)) if keyed
              else parse_cache._digest(payload))
    parse_cache.entry_path(str(path), where).write_bytes(parse_cache.MAGIC + parse_cache.key(text) + digest + payload)


@pytest.fixture(autouse=True)
def _fresh_folder_verdicts():
    parse_cache._folder_problem.cache_clear()
    parse_cache._SECRETS.clear()
    yield
    parse_cache._folder_problem.cache_clear()
    parse_cache._SECRETS.clear()


def test_a_forged_entry_changes_no_verdict_and_reaches_no_shell(tmp_path, cache_in):
    """The finding: under the bytes of a broken file, the parse of a valid workload named
    ``ck\ntouch PWNED\n#``, its key and payload hash computed as anyone can.  validate still says
    the file is broken, and plan writes no script; with the folder's own key the name is refused."""
    text = "this is not a workload }}}{{{"
    path = tmp_path / "w.wl"
    path.write_text(text, encoding="utf-8")
    evil = (parse_text(GOOD, str(path))[0]._replace(name="ck\ntouch PWNED\n#"),)
    for keyed in (False, True):
        _entry(cache_in, path, text, evil, keyed)
        assert parse_cache.load(str(path), text) is None
        env = {parse_cache.ENV: str(cache_in)}
        validate = _cli("validate", str(path), env=env)
        assert validate.returncode == 1 and "E106" in validate.stdout + validate.stderr
        plan = _cli("plan", str(path), "-f", "sh", env=env)
        assert plan.returncode == 1 and "touch PWNED" not in plan.stdout


def test_an_entry_not_written_with_the_folders_key_is_a_miss(tmp_path, cache_in):
    """Another text's parse (a valid workload) under this text's key: without the folder's secret
    its hash cannot be made, so it never stands for the text."""
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    other = parse_text(GOOD.replace("train_steps = 3", "train_steps = 9"), str(path))
    _entry(cache_in, path, GOOD, other, keyed=False)
    assert parse_cache.load(str(path), GOOD) is None
    parse_file(path)  # parsed again, and kept with the key
    assert parse_cache.load(str(path), GOOD) is not None
    assert stat.S_IMODE((cache_in / parse_cache.KEY_FILE).stat().st_mode) == 0o600


@pytest.mark.parametrize("what", ["a NaN lr", "an infinite lr", "a surrogate name", "a name with a space",
                                  "a newline in a key", "a unit of no language", "a bool for a number"])
def test_an_entry_holding_a_value_no_lexer_makes_is_a_miss_even_with_the_key(tmp_path, cache_in, what):
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    w = parse_text(GOOD.replace("lr = 0.001", "lr = 0.5"), str(path))[0]
    plain = parse_cache._plain_workload(w)
    payload = parse_cache._encoded((plain,))
    if what in ("a NaN lr", "an infinite lr"):
        assert payload.count(b",0.5,") == 1
        payload = payload.replace(b",0.5,", b",NaN," if "NaN" in what else b",Infinity,")
    elif what == "a bool for a number":
        payload = parse_cache._encoded((_swap(plain, 0.5, True),))
    else:
        old, new = {"a surrogate name": ("w", "w\ud800"), "a name with a space": ("w", "w x"),
                    "a newline in a key": ("train_steps", "train\nsteps"), "a unit of no language": ("tokens", "rm")}[what]
        payload = parse_cache._encoded((_swap(plain, old, new),))
    _write(cache_in, path, GOOD, payload)
    assert parse_cache.load(str(path), GOOD) is None
    assert [w.name for w in parse_file(path).workloads] == ["w"]  # parsed again, and kept again
    assert parse_cache.load(str(path), GOOD) is not None


def _swap(plain, old, new):
    """``plain`` (nested tuples) with the first ``old`` (of the same type) replaced by ``new``."""
    done = []

    def walk(x):
        if not done and type(x) is type(old) and x == old:
            done.append(1)
            return new
        return tuple(walk(y) for y in x) if isinstance(x, tuple) else x

    out = walk(plain)
    assert done, old
    return out


@pytest.mark.parametrize("what", ["a block where a value goes", "a string where an item goes",
                                  "an entry as a call's argument", "a node that is no array",
                                  "a span past any text", "a negative span"])
def test_an_entry_of_a_shape_no_parse_makes_is_a_miss_even_with_the_key(tmp_path, cache_in, what):
    """An entry keyed as this user's accelctl keys it, whose nodes are each well formed but one
    stands where no parse puts it: a miss, parsed again -- never a crash of the checker."""
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    plain = json.loads(parse_cache._encoded([parse_cache._plain_workload(parse_text(GOOD, str(path))[0])]))
    items = plain[0][1]
    block = next(i for i in items if i[0] == parse_cache._BLOCK)
    entry = block[3][0]
    call = next(i for i in items if i[0] == parse_cache._STATEMENT and i[2][0] == parse_cache._CALL)[2]
    if what == "a block where a value goes":
        entry[2] = json.loads(json.dumps(block))
    elif what == "a string where an item goes":
        items.insert(0, [parse_cache._STR, "hi", 1, 1, 1, 3])
    elif what == "an entry as a call's argument":
        call[2].append(entry)
    elif what == "a span past any text":
        entry[-4:] = [5, 10**15, 5, 10**15 + 7]  # its key's span: a caret 10**15 columns in
    elif what == "a negative span":
        entry[-4:] = [-1, -5, 1, 1]
    else:
        items.insert(0, "x")
    _write(cache_in, path, GOOD, parse_cache._encoded(plain))
    assert parse_cache.load(str(path), GOOD) is None
    r = _cli("plan", str(path), env={parse_cache.ENV: str(cache_in)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert parse_cache.load(str(path), GOOD) is not None  # parsed again, and kept again


@pytest.mark.parametrize("kind", ["fifo", "link", "device"])
def test_a_fifo_link_or_device_at_an_entry_path_is_a_miss_never_a_wait(tmp_path, cache_in, kind):
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    parse_file(path)
    entry = parse_cache.entry_path(str(path), cache_in)
    good = entry.read_bytes()
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "link":
        (tmp_path / "elsewhere").write_bytes(good)
        entry.symlink_to(tmp_path / "elsewhere")
    else:
        entry.symlink_to("/dev/zero")
    proc = _cli("validate", str(path), env={parse_cache.ENV: str(cache_in)}, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not entry.is_symlink() and stat.S_ISREG(entry.lstat().st_mode)  # replaced by a real entry
    assert (kind != "link") or (tmp_path / "elsewhere").read_bytes() == good


@pytest.mark.parametrize("kind", ["writable by its group", "a fifo"])
def test_a_folder_secret_others_could_know_is_one_warning_and_no_cache(tmp_path, cache_in, kind):
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    parse_file(path)
    key = cache_in / parse_cache.KEY_FILE
    parse_cache._SECRETS.clear()
    if kind == "a fifo":
        key.unlink()
        os.mkfifo(key)
    else:
        os.chmod(key, 0o660)
    assert parse_cache.load(str(path), GOOD) is None
    assert [w.name for w in parse_file(path).workloads] == ["w"]
    warned = private_files.take_warnings()
    assert [d.code for d in warned] == ["W010"] and str(key) in warned[0].path
    parse_cache._SECRETS.clear()


def test_the_folders_it_makes_are_0700_whatever_the_umask(tmp_path, monkeypatch):
    where = tmp_path / "a" / "b" / "parsed"
    monkeypatch.setenv(parse_cache.ENV, str(where))
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    old = os.umask(0o002)
    try:
        parse_file(path)
    finally:
        os.umask(old)
    for level in (where, where.parent, where.parent.parent):
        assert stat.S_IMODE(level.stat().st_mode) == 0o700, level
    assert stat.S_IMODE(next(where.iterdir()).stat().st_mode) == 0o600


@pytest.mark.parametrize("how", ["world-writable", "group-writable", "writable parent without sticky bit"])
def test_a_folder_others_can_write_is_not_used_one_warning_uncached(tmp_path, how):
    where = tmp_path / "shared" / "parsed"
    where.mkdir(parents=True, mode=0o700)
    if how == "writable parent without sticky bit":
        os.chmod(where.parent, 0o777)
    else:
        os.chmod(where, 0o777 if how == "world-writable" else 0o770)
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    proc = _cli("validate", str(path), str(path), "--json", env={parse_cache.ENV: str(where)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("warning[W010]") == 1, proc.stderr
    doc = json.loads(proc.stdout)
    warned = [d for d in doc["diagnostics"] if d["code"] == "W010"]
    assert len(warned) == 1 and warned[0]["severity"] == "warning" and "parsed-workload cache" in warned[0]["message"]
    assert list(where.iterdir()) == []  # nothing written into it


@as_root
def test_a_1777_folder_owned_by_another_user_is_not_used(tmp_path):
    """The finding: a sticky, world-writable cache folder owned by nobody was taken as it is."""
    cache = tmp_path / "xdg"
    (cache / "accelctl" / "parsed").mkdir(parents=True)
    for level in (cache / "accelctl", cache / "accelctl" / "parsed"):
        os.chown(level, NOBODY, NOBODY)
        os.chmod(level, 0o1777)
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    proc = _cli("validate", str(path), env={"XDG_CACHE_HOME": str(cache), parse_cache.ENV: ""})
    assert proc.returncode == 0 and "warning[W010]" in proc.stderr and "uid 65534" in proc.stderr, proc.stderr
    assert list((cache / "accelctl" / "parsed").iterdir()) == []


@as_root
def test_an_entry_owned_by_another_user_is_a_miss(tmp_path, cache_in):
    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    parse_file(path)
    entry = parse_cache.entry_path(str(path), cache_in)
    os.chown(entry, NOBODY, NOBODY)
    assert parse_cache.load(str(path), GOOD) is None
    os.chown(entry, 0, 0)
    os.chmod(entry, 0o666)
    assert parse_cache.load(str(path), GOOD) is None
    os.chmod(entry, 0o600)
    assert parse_cache.load(str(path), GOOD) is not None


def test_a_commands_json_document_carries_its_own_warnings_not_an_earlier_commands(tmp_path, capsys):
    """In one process (the TUI, a test run) a warning given to an earlier command is not in the
    next command's ``--json`` diagnostics, and a command that meets the folder is warned again."""
    from accelctl.cli import main

    path = tmp_path / "w.wl"
    path.write_text(GOOD, encoding="utf-8")
    private_files.distrust("an earlier command's cache", tmp_path / "elsewhere", "it was not private")
    capsys.readouterr()
    assert main(["validate", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["diagnostics"] == []
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    for _ in range(2):
        os.environ[parse_cache.ENV] = str(shared / "parsed")
        assert main(["validate", str(path), "--json"]) == 0
        codes = [d["code"] for d in json.loads(capsys.readouterr().out)["diagnostics"]]
        assert codes == ["W010"], codes


def test_a_sticky_world_writable_folder_above_is_fine(tmp_path):
    """``/tmp`` (1777, root's): nobody can rename another's entries in it."""
    top = tmp_path / "tmp-like"
    top.mkdir()
    os.chmod(top, 0o1777)
    assert private_files.make_folder(top / "mine" / "parsed") == ""


@pytest.mark.parametrize("change, code", [
    (lambda w: w._replace(name="ck\ntouch PWNED\n#"), "E109"),
    (lambda w: w._replace(name="w\ud800"), "E109"),
    (lambda w: _set_lr(w, float("nan")), "E003"),
    (lambda w: _set_lr(w, float("inf")), "E003"),
    (lambda w: _set_lr(w, True), "E109"),
])
def test_the_checker_refuses_what_no_text_can_hold_whatever_built_it(tmp_path, change, code):
    """An AST made by a program (or read from anywhere) is checked on its values: a NaN is not
    taken for a positive learning rate, a newline is no part of a name."""
    from accelctl.dsl import ast
    from accelctl.language.check import check_all

    workloads = parse_text(GOOD, "w.wl")
    specs, diags = check_all(ast.File("w.wl", GOOD, (change(workloads[0]),)))
    assert specs == () and [d.code for d in diags if d.severity == "error"] == [code], diags


def _set_lr(w, value):
    from accelctl.dsl import ast

    def walk(node):
        if isinstance(node, ast.KwArg) and node.name == "lr":
            return node._replace(value=node.value._replace(value=value))
        if isinstance(node, ast.Call):
            return node._replace(kwargs=tuple(walk(k) for k in node.kwargs))
        if isinstance(node, ast.Statement):
            return node._replace(value=walk(node.value))
        return node

    return w._replace(items=tuple(walk(i) for i in w.items))


def test_the_value_checks_are_the_grammars_terminals():
    """``lexemes.NAME`` and ``lexemes.UNITS`` are what grammar/workload.lark says; ``is_name`` and
    ``all_names`` (no regular expression) agree with the grammar's NAME pattern on every string
    of a few characters drawn from the edges of its classes."""
    import itertools
    import re

    from accelctl.dsl import lexemes
    from accelctl.dsl.grammar import grammar_text

    grammar = grammar_text()
    name = re.search(r"^NAME: /(.*)/$", grammar, re.M).group(1)
    assert name == lexemes.NAME
    units = re.search(r"^UNIT\.2: /\((.*?)\)\(\?!", grammar, re.M).group(1).replace("\\", "").split("|")
    assert set(units) == lexemes.UNITS
    pattern = re.compile(name)
    alphabet = "aZ_09-.\n é$"
    for size in range(4):
        for chars in itertools.product(alphabet, repeat=size):
            x = "".join(chars)
            assert lexemes.is_name(x) == bool(pattern.fullmatch(x)), repr(x)
    for names in (["a", "b_1"], ["a", "1b"], ["a", ""], ["a\nb"], [], ["x", 3]):
        assert lexemes.all_names(names) == all(isinstance(n, str) and pattern.fullmatch(n) for n in names), names

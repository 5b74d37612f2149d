"""The parsed-workload cache: a file's AST kept on disk, as Python keeps a module's bytecode.

``load(path, text)`` returns the workloads parsed before from exactly ``text``, or None;
``store(path, text, workloads)`` keeps a successful parse; a hit skips lark (not even imported).
Where: ``$ACCELCTL_PARSE_CACHE`` (``off``: none), else ``parsed/`` in ``hostinfo.cache_dir()``; one
entry per file path, at most ``MAX_ENTRIES``, texts up to ``MAX_CACHED_BYTES``.  An entry is keyed
by the text and everything the parse depends on (``fingerprint()``), authenticated with the
folder's secret (``KEY_FILE``), and holds the AST as JSON arrays of plain values (never pickle);
anything that does not match, or holds a value no lexer makes, is a miss and parsed again.  A
folder others could write is not used.  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import _thread
import functools
import json
import os
from itertools import repeat
from pathlib import Path

from hashlib import blake2b

from accelctl import private_files
from accelctl.dsl import ast, lexemes
from accelctl.errors import Span
from accelctl.hostinfo import cache_dir

#: where to keep the entries instead (``off``: no cache)
ENV = "ACCELCTL_PARSE_CACHE"
#: the cache, as its warning names it
WHAT = "the parsed-workload cache"
#: the first bytes of every entry; bump the digit when the layout below changes
MAGIC = b"accelctl-parsed-3\n"
#: entries kept; writing past this removes the oldest quarter
MAX_ENTRIES = 128
#: larger texts are parsed every time (an entry is larger than its text)
MAX_CACHED_BYTES = 128 * 1024
_HASH = 32  # bytes of a digest (``_digest``)
#: the folder's secret, which keys each entry's hash (``_mac``)
KEY_FILE = "key"
_SECRETS: dict[Path, bytes] = {}


def _digest(data: bytes) -> bytes:
    """BLAKE2b, 32 bytes."""
    return blake2b(data, digest_size=_HASH).digest()


def folder() -> Path | None:
    """Where the entries go; None when the cache is off (``ACCELCTL_PARSE_CACHE=off``)."""
    chosen = os.environ.get(ENV)
    if chosen == "off":
        return None
    return Path(chosen) if chosen else cache_dir() / "parsed"


def depends_on() -> list[Path]:
    """The files a parse depends on besides the text: the grammar, lark's ``__init__`` (it
    carries lark's version), the modules that build the AST (and ``Span``), and this one."""
    from importlib.util import find_spec

    from accelctl.dsl.grammar import grammar_path

    here = Path(__file__).parent
    modules = [here / name for name in ("ast.py", "lalr.py", "parse_cache.py")]
    return [grammar_path(), Path(find_spec("lark").origin), *modules, here.parent / "errors.py"]


@functools.lru_cache(maxsize=1)
def fingerprint() -> bytes | None:
    """A hash of ``MAGIC`` and of the files of ``depends_on()``; None (no cache) when one of
    them cannot be found or read."""
    digest = blake2b(MAGIC, digest_size=_HASH)
    try:
        for file in depends_on():
            part = file.read_bytes()
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
    except (OSError, AttributeError, TypeError, ValueError, ImportError):
        return None
    return digest.digest()


def key(text: str) -> bytes | None:
    """The key of ``text``'s parse: a hash of its UTF-8 bytes and of ``fingerprint()``."""
    base = fingerprint()
    if base is None:
        return None
    return _digest(base + text.encode("utf-8", "surrogatepass"))


def entry_path(path: str, where: Path) -> Path:
    """The entry of the file at ``path`` (one per absolute path)."""
    name = _digest(os.path.abspath(path).encode("utf-8", "surrogatepass")).hex()
    return where / f"{name}.ast"


def load(path: str, text: str) -> tuple[ast.Workload, ...] | None:
    """The workloads parsed from exactly ``text`` before, or None (a miss, for any reason)."""
    where = folder()
    if where is None or len(text) > MAX_CACHED_BYTES or not os.path.isdir(where):
        return None
    want = key(text)
    if want is None:
        return None
    problem = _folder_problem(str(where))
    if problem:
        private_files.distrust(WHAT, where, problem)
        return None
    try:  # a link, FIFO, device or a file others could write: a miss, never followed or waited on
        data = private_files.read_file(entry_path(path, where), len(MAGIC) + 2 * _HASH + 8 * MAX_CACHED_BYTES)
    except (OSError, ValueError):
        return None
    head = len(MAGIC)
    if data[:head] != MAGIC or data[head:head + _HASH] != want:
        return None
    payload = data[head + 2 * _HASH:]
    secret = _secret(str(where))
    if secret is None or _mac(payload, secret) != data[head + _HASH:head + 2 * _HASH]:
        return None  # truncated, corrupt, or not written by this user's accelctl
    names: list[str] = []
    try:
        workloads = tuple([_workload(w, names) for w in json.loads(payload)])
    except Exception:  # noqa: BLE001 -- whatever is wrong with an entry, the text is parsed again
        return None
    return workloads if lexemes.all_names(names) else None


def _mac(payload: bytes, secret: bytes) -> bytes:
    """The payload's BLAKE2b keyed with the folder's secret: an entry only this user's accelctl
    could have written (the key of an entry is a hash of public inputs; this is not)."""
    return blake2b(payload, digest_size=_HASH, key=secret).digest()


def _secret(where: str, create: bool = False) -> bytes | None:
    """The cache folder's secret (``KEY_FILE``: 32 random bytes, mode 0600, this user's), made
    when ``create`` and missing; None where there is none to be had (the cache is then unused)."""
    path = Path(where) / KEY_FILE
    if path in _SECRETS:  # read once a process (a stale one only costs misses)
        return _SECRETS[path]
    try:
        data = private_files.read_file(path, 2 * _HASH)
    except FileNotFoundError:
        data = _new_secret(path) if create else b""
    except private_files.Untrusted as exc:  # its secret is no secret: the cache is not used
        private_files.distrust(WHAT, path, exc.strerror or str(exc))
        data = b""
    except (OSError, ValueError):
        data = b""
    if len(data) != _HASH:
        return None
    _SECRETS[path] = data
    return data


def _new_secret(path: Path) -> bytes:
    """Write a new secret at ``path`` whole (a file of its own, linked into place: a reader never
    sees half of one) and return it -- or the one another process linked there first."""
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{_thread.get_ident()}.tmp")
    data = os.urandom(_HASH)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return private_files.read_file(path, 2 * _HASH)
        return data
    except (OSError, ValueError):
        return b""
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


@functools.lru_cache(maxsize=4)
def _folder_problem(where: str) -> str:
    """``private_files.folder_problem`` of the cache folder, once a process (every file read looks)."""
    return private_files.folder_problem(Path(where))


def store(path: str, text: str, workloads: tuple[ast.Workload, ...]) -> None:
    """Keep ``workloads``, parsed from ``text``, for the file at ``path``; quietly nothing when
    the cache is off or its folder cannot be written (read-only, full, not a folder)."""
    where = folder()
    if where is None or len(text) > MAX_CACHED_BYTES:
        return
    want = key(text)
    if want is None:
        return
    payload = _encoded([_plain_workload(w) for w in workloads])
    entry = entry_path(path, where)
    tmp = entry.with_name(f"{entry.name}.{os.getpid()}.{_thread.get_ident()}.tmp")  # this writer's own
    problem = private_files.make_folder(where)
    if problem:
        private_files.distrust(WHAT, where, problem)
        return
    secret = _secret(str(where), create=True)
    if secret is None:
        return
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o600)  # never into a file or link already there (a leftover is removed below)
        try:
            rest = memoryview(MAGIC + want + _mac(payload, secret) + payload)
            while rest:  # a short write (a full disk) is followed by one that raises
                rest = rest[os.write(fd, rest):]
        finally:
            os.close(fd)
        os.replace(tmp, entry)
        _prune(where)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _prune(where: Path) -> None:
    """Past ``MAX_ENTRIES``, remove the oldest entries (and leftovers of interrupted writes)
    down to three quarters of it."""
    names = os.listdir(where)
    if len(names) <= MAX_ENTRIES:
        return
    aged = []
    for name in names:
        if name.endswith((".ast", ".tmp")):
            try:
                aged.append((os.stat(where / name).st_mtime_ns, name))
            except OSError:
                continue
    aged.sort()
    for _, name in aged[:max(0, len(aged) - MAX_ENTRIES * 3 // 4)]:
        try:
            os.unlink(where / name)
        except OSError:
            pass


# ----------------------------------------------------------------- the AST as JSON arrays and back
# Each node is an array: a tag (its class), its fields, each span as four ints in place.

_STR, _NUM, _QUANTITY, _WORD, _KWARG, _CALL, _LIST, _ENTRY, _STATEMENT, _BLOCK = range(10)


def _encoded(plain) -> bytes:
    """An entry's payload: the plain values as compact ASCII JSON."""
    return json.dumps(plain, separators=(",", ":")).encode("ascii")


def _plain_workload(w: ast.Workload) -> tuple:
    return (w.name, tuple(_plain(i) for i in w.items), *w.span, *w.name_span)


def _plain(node) -> tuple:
    """A node as a tagged tuple of str, int, float and tuples (JSON arrays in the entry)."""
    kind = type(node)
    if kind is ast.Str:
        return (_STR, node.value, *node.span)
    if kind is ast.Num:
        return (_NUM, node.value, node.text, *node.span)
    if kind is ast.Quantity:
        return (_QUANTITY, node.value, node.unit, *node.span)
    if kind is ast.Word:
        return (_WORD, node.name, *node.span)
    if kind is ast.KwArg:
        return (_KWARG, node.name, _plain(node.value), *node.span)
    if kind is ast.Call:
        return (_CALL, node.name, tuple(_plain(a) for a in node.args), tuple(_plain(k) for k in node.kwargs),
                *node.span, *node.name_span)
    if kind is ast.ListV:
        return (_LIST, tuple(_plain(i) for i in node.items), *node.span)
    if kind is ast.Entry or kind is ast.Statement:
        return (_ENTRY if kind is ast.Entry else _STATEMENT, node.key, _plain(node.value), *node.span, *node.key_span)
    if kind is ast.Block:
        return (_BLOCK, node.kind, None if node.header is None else _plain(node.header),
                tuple(_plain(i) for i in node.items), *node.span, *node.kind_span)
    raise TypeError(f"not an AST node: {kind.__name__}")


def _workload(t: tuple, names: list[str]) -> ast.Workload:
    if len(t) != 10:
        raise ValueError("a workload that is not ten values")
    names.append(t[0])
    return ast.Workload(t[0], _nodes(t[1], names, _ITEMS), _span(t, 2), _span(t, 6))


#: a node's class from its tag, and its length as a tagged tuple (the tag, the fields, four ints a span)
_LEAVES = {_STR: (ast.Str, 6), _WORD: (ast.Word, 6), _NUM: (ast.Num, 7), _QUANTITY: (ast.Quantity, 7)}


#: the tags of a value (what an entry, a header, an argument or a list item holds) and of an item
#: (what a workload or a block holds): a node of the other kind where one goes is no parse
_VALUES = frozenset((_STR, _NUM, _QUANTITY, _WORD, _CALL, _LIST))
_ITEMS = frozenset((_ENTRY, _STATEMENT, _BLOCK))


def _nodes(items, names: list[str], kinds: frozenset = _VALUES) -> tuple:
    if type(items) is not list:
        raise TypeError("items that are not a list")
    return tuple(map(_node, items, repeat(names), repeat(kinds)))  # map: the loop in C


def _node(t: list, names: list[str], kinds: frozenset = _VALUES):
    """The node a tagged array of ``_plain`` stands for, of one of ``kinds`` (a value where a
    value goes, an item where an item goes), each number finite, each unit the language's, each
    string UTF-8 text; its names go into ``names`` (``lexemes.all_names`` checks them at once); a
    ValueError/TypeError for anything else."""
    if type(t) is not list or not t or type(t[0]) is not int or t[0] not in kinds:
        raise ValueError("a node that is not one of what goes there")
    tag = t[0]
    if tag in _LEAVES:  # (text or name, span) or (number, text or unit, span)
        kind, size = _LEAVES[tag]
        if len(t) != size:
            raise ValueError(f"a {kind.__name__} of {len(t)} values")
        if tag == _WORD:
            names.append(t[1])
            return ast.Word(t[1], _span(t, 2))
        if tag == _STR:
            return ast.Str(_text(t[1]), _span(t, 2))
        if tag == _QUANTITY and t[2] not in lexemes.UNITS:
            raise ValueError("a unit that is not the language's")
        return kind(_number(t[1]), _text(t[2]), _span(t, 3))
    if tag == _ENTRY or tag == _STATEMENT:  # (key, value, span, key span)
        if len(t) != 11:
            raise ValueError("an entry that is not eleven values")
        names.append(t[1])
        return (ast.Entry if tag == _ENTRY else ast.Statement)(t[1], _node(t[2], names), _span(t, 3), _span(t, 7))
    if tag == _BLOCK:  # (kind, header, items, span, kind span)
        if len(t) != 12:
            raise ValueError("a block that is not twelve values")
        names.append(t[1])
        return ast.Block(t[1], None if t[2] is None else _node(t[2], names), _nodes(t[3], names, _ITEMS), _span(t, 4),
                         _span(t, 8))
    if tag == _CALL:  # (name, args, kwargs, span, name span)
        if len(t) != 12:
            raise ValueError("a call that is not twelve values")
        names.append(t[1])
        return ast.Call(t[1], _nodes(t[2], names), _kwargs(t[3], names), _span(t, 4), _span(t, 8))
    if tag == _LIST:  # (items, span)
        if len(t) != 6:
            raise ValueError("a list that is not six values")
        return ast.ListV(_nodes(t[1], names), _span(t, 2))
    raise ValueError(f"unknown node tag {tag!r}")


def _kwargs(items, names: list[str]) -> tuple:
    """A call's keyword arguments: (tag, name, value, span) each."""
    if type(items) is not list:
        raise TypeError("keyword arguments that are not a list")
    out = []
    for t in items:
        if type(t) is not list or len(t) != 7 or t[0] != _KWARG:
            raise ValueError("a keyword argument that is not seven values")
        names.append(t[1])
        out.append(ast.KwArg(t[1], _node(t[2], names), _span(t, 3)))
    return tuple(out)


_MAX_INT_BITS = lexemes.MAX_INT_BITS


def _text(x) -> str:
    if type(x) is not str or not (x.isascii() or lexemes.is_text(x)):
        raise TypeError("a text that is not a str of UTF-8 text")
    return x


def _number(x) -> int | float:
    kind = type(x)
    if kind is float:
        if x - x != 0.0:  # NaN or an infinity
            raise ValueError("a number that is not finite")
    elif kind is not int or x.bit_length() > _MAX_INT_BITS:
        raise TypeError("a number that is not a finite float or an int of at most 4,300 digits")
    return x


#: a line or column past this is in no text the cache keeps (at most ``MAX_CACHED_BYTES``)
_MAX_POSITION = MAX_CACHED_BYTES + 1


def _span(t: tuple, at: int) -> Span:
    """The span held as four ints at ``t[at:at + 4]``, each a position some kept text has."""
    four = t[at:at + 4]
    if (len(four) != 4 or type(four[0]) is not int or type(four[1]) is not int or type(four[2]) is not int
            or type(four[3]) is not int):
        raise TypeError("a span that is not four ints")
    if not (0 <= four[0] <= _MAX_POSITION and 0 <= four[1] <= _MAX_POSITION and 0 <= four[2] <= _MAX_POSITION
            and 0 <= four[3] <= _MAX_POSITION):
        raise ValueError("a span past any text the cache keeps")
    return Span._make(four)

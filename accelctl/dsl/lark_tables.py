"""lark's parser tables for the grammar, shipped in the package as JSON data.

Building the LALR tables costs every process time; lark's own ``cache=`` keeps them in a pickle,
and a pickle is code (whoever can write it runs code in the next reader).  So the tables are built
once (``python -m accelctl.dsl.lark_tables``, or the suite with ``ACCELCTL_UPDATE_GOLDEN=1``) into
``accelctl/_grammar/workload.tables.json`` and read with ``json.loads`` and lark's deserializer.
The file names the grammar's SHA-256 and lark's version; ``load()`` gives None (build from the
grammar) when either differs or the file is bad.  JSON encoding: a tuple is ``{"(": [...]}``, a
dict with non-string keys ``{"{": [[key, value], ...]}``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import lark

from accelctl.dsl.grammar import grammar_path, grammar_text

#: the options every parser of the grammar shares (those that change its tables)
OPTIONS: dict[str, Any] = {"parser": "lalr", "lexer": "contextual", "maybe_placeholders": False}
_TUPLE, _ITEMS = "(", "{"


def tables_path() -> Path:
    """``workload.tables.json`` in the package's ``_grammar`` folder."""
    return Path(__file__).resolve().parents[1] / "_grammar" / "workload.tables.json"


def _stamp() -> dict[str, str]:
    """What the tables were built from: the grammar's text and lark's version."""
    return {"grammar_sha256": hashlib.sha256(grammar_text().encode("utf-8")).hexdigest(),
            "lark": lark.__version__}


def _encode(value: Any) -> Any:
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if all(type(k) is str for k in value) and _TUPLE not in value and _ITEMS not in value:
            return {k: _encode(v) for k, v in value.items()}
        return {_ITEMS: [[_encode(k), _encode(v)] for k, v in value.items()]}
    if value is None or type(value) in (str, int, float, bool):
        return value
    raise TypeError(f"lark's tables hold a {type(value).__name__}, which this file cannot keep")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and _TUPLE in value:
            return tuple(_decode(v) for v in value[_TUPLE])
        if len(value) == 1 and _ITEMS in value:
            return {_hashable(_decode(k)): _decode(v) for k, v in value[_ITEMS]}
        return {k: _decode(v) for k, v in value.items()}
    return value


def _hashable(key: Any) -> Any:
    if not isinstance(key, (str, int, float, bool, tuple)) and key is not None:
        raise ValueError("a key that is not a scalar or a tuple")
    return key


def build() -> dict[str, Any]:
    """The tables of the grammar as the file holds them (analysed by lark now)."""
    parser = lark.Lark(grammar_text(), **OPTIONS)
    data, memo = parser.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
    return {**_stamp(), "data": _encode(data), "memo": _encode(memo)}


def text() -> str:
    """The file's text for the grammar now.  (lark numbers states and terminals in set order, so
    two builds may number them differently: equivalent tables, not the same bytes.)"""
    return json.dumps(build(), indent=0) + "\n"


def write() -> Path:
    """Write the tables file for the grammar now (at build time, never by a command)."""
    tables_path().write_text(text(), encoding="utf-8")
    return tables_path()


@functools.lru_cache(maxsize=1)
def load() -> tuple[dict, dict] | None:
    """lark's ``(data, memo)`` for the grammar now, from the shipped file; None when the file is
    missing, malformed, or was built from another grammar text or lark version."""
    try:
        stored = json.loads(tables_path().read_text(encoding="utf-8"))
        if not isinstance(stored, dict) or any(stored.get(k) != v for k, v in _stamp().items()):
            return None
        data, memo = _decode(stored["data"]), _decode(stored["memo"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return (data, memo) if isinstance(data, dict) and isinstance(memo, dict) else None


def parser(**options: Any) -> lark.Lark:
    """The grammar's parser with ``options`` (lark's load-time ones: the transformer, lexer
    callbacks): from the shipped tables when they are this grammar's, else analysed now."""
    tables = load()
    if tables is not None:
        try:
            return lark.Lark._load_from_dict(*tables, **options)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, lark.exceptions.LarkError):
            pass  # tables of a shape this lark does not read: analyse the grammar instead
    return lark.Lark(grammar_text(), **OPTIONS, **options)


if __name__ == "__main__":
    print(f"wrote {write()} for {grammar_path()}")

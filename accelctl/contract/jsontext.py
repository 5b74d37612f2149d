"""The JSON a plan writes (engine requests, backend configs, the worker's ``job.json``):
``json.dumps``'s text, written faster.

Why: ``json.dumps`` with ``indent`` runs the pure-Python encoder, ``validate`` plans every target,
and escaping each ``{`` of a job's strings (``placeholders.data_json``) took a regular expression
over the whole text.  Here plain JSON data (dicts with str keys, lists, tuples, str, int, finite
float, bool, None, exactly those types) is written by one recursive function with the C string
encoders; anything else is handed to ``json.dumps`` itself, so the text is always what
``json.dumps`` writes (tests/test_jsontext.py checks it byte for byte).
"""

from __future__ import annotations

import json
import math
import re
from json.encoder import encode_basestring, encode_basestring_ascii

#: a JSON string token as ``json.dumps`` writes it
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
BRACE, ESCAPED_BRACE = "{", "\\u007b"


class _NotPlain(Exception):
    """A value this writer leaves to ``json.dumps``."""


def dumps(obj, *, indent: int | None = 2, separators: tuple[str, str] | None = None, sort_keys: bool = False,
          ensure_ascii: bool = True, braces_escaped: bool = False) -> str:
    """``json.dumps(obj, indent=indent, separators=separators, sort_keys=sort_keys,
    ensure_ascii=ensure_ascii)``; ``braces_escaped``: each ``{`` inside a string (a key or a
    value) written ``\\u007b``, the same string to a JSON reader."""
    items, keys = separators or ((",", ": ") if indent is not None else (", ", ": "))
    encode = encode_basestring_ascii if ensure_ascii else encode_basestring
    text = (lambda s: encode(s).replace(BRACE, ESCAPED_BRACE)) if braces_escaped else encode
    out: list[str] = []
    try:
        _write(obj, out, "" if indent is None else "\n", " " * (indent or 0), items, keys, text, sort_keys)
    except (_NotPlain, RecursionError):
        written = json.dumps(obj, indent=indent, separators=separators, sort_keys=sort_keys,
                             ensure_ascii=ensure_ascii)
        if braces_escaped and BRACE in written:
            return _JSON_STRING.sub(lambda m: m.group(0).replace(BRACE, ESCAPED_BRACE), written)
        return written
    return "".join(out)


def _write(o, out: list[str], newline: str, step: str, items: str, keys: str, text, sort_keys: bool) -> None:
    """Append ``o`` to ``out``; ``newline``: a newline and the indent of the line ``o`` is on
    ("" when compact), ``step`` one more level of indent; ``items``/``keys`` the separators."""
    kind = type(o)
    if kind is str:
        out.append(text(o))
    elif kind is dict or kind is list or kind is tuple:
        is_dict = kind is dict
        if not o:
            out.append("{}" if is_dict else "[]")
            return
        inner = newline + step
        before = ("{" if is_dict else "[") + inner
        after = items + inner
        if is_dict:
            for key in (sorted(o) if sort_keys else o):  # str keys are unique: sorted as the items are
                if type(key) is not str:
                    raise _NotPlain
                out.append(before)
                out.append(text(key))
                out.append(keys)
                _write(o[key], out, inner, step, items, keys, text, sort_keys)
                before = after
        else:
            for item in o:
                out.append(before)
                _write(item, out, inner, step, items, keys, text, sort_keys)
                before = after
        out.append(newline + ("}" if is_dict else "]"))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(o))
    elif kind is float and math.isfinite(o):  # NaN and infinities: json.dumps decides (allow_nan)
        out.append(float.__repr__(o))
    else:
        raise _NotPlain

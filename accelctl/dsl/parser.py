"""Parse workload text into the AST, with positions, or positioned syntax diagnostics.

``parse(text, path)`` returns an ``ast.File`` or raises ``WorkloadError`` whose
diagnostic says what kind of syntax error it is (missing brace, missing ``=``, bad
string, stray token...), points at it, and hints at the fix.

The one parser is lark's LALR parser over ``grammar/workload.lark``, building the AST as
it reduces (``accelctl.dsl.lalr``).  A text over ``MAX_SOURCE_BYTES`` is refused before it
is read (E004); files are read by ``accelctl.dsl.source``.  ``parse(..., cached=True)`` (a
file's text, as read from ``path``: ``parse_file`` and ``accelctl.api``'s load path) first
looks for the same text's parse in ``accelctl.dsl.parse_cache`` and keeps a new one there; lark
is imported only when a text is parsed.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.dsl import ast, lexemes, parse_cache, source
from accelctl.dsl.grammar import grammar_path  # noqa: F401 -- the name callers import from here
from accelctl.dsl.source import MAX_SOURCE_BYTES, read_source  # noqa: F401 -- the names callers import from here
from accelctl.errors import WorkloadError, attach_source

#: names served from ``accelctl.dsl.lalr``, imported on first use (PEP 562): importing it imports lark
_FROM_LALR = ("MAX_NESTING", "lark_parser", "parse_text")


def __getattr__(name: str):
    if name not in _FROM_LALR:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from accelctl.dsl import lalr

    return getattr(lalr, name)


def parse(text: str, path: str = "<input>", cached: bool = False) -> ast.File:
    """Parse a workload file.  Raises ``WorkloadError`` with one positioned diagnostic.
    ``cached``: ``text`` is the file at ``path`` as read from it; its parse may come from, and
    goes into, the parsed-workload cache (only a parse without errors is kept)."""
    size = _size_if_large(text)
    if size > source.MAX_SOURCE_BYTES:
        raise WorkloadError(diagnostics=attach_source([source.too_large(size, path, read=size == len(text))], text))
    workloads = parse_cache.load(path, text) if cached else None
    if workloads is None:
        from accelctl.dsl.lalr import parse_text

        try:
            workloads = parse_text(text, path)
        except WorkloadError as exc:
            raise WorkloadError(diagnostics=attach_source(exc.diagnostics, text)) from None
        if cached:
            parse_cache.store(path, text, workloads)
    # lark's tokens, or a cache entry checked against the text: lexed, unless the text itself is not
    # UTF-8 text (a str with a lone surrogate, from a program): then the checker looks at the values
    return ast.File(path, text, workloads, lexed=lexemes.is_text(text))


def _size_if_large(text: str) -> int:
    """The text's size in UTF-8 bytes where it may be over the limit (0 where it cannot be; its
    length in characters, a lower bound, where that is over already): a character is one to
    four bytes, so only a text in between is encoded."""
    limit = source.MAX_SOURCE_BYTES
    if len(text) > limit:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > limit else 0


def parse_file(path: str | Path) -> ast.File:
    """Read and parse a file; a missing or unreadable file is a diagnostic too (``read_source``)."""
    return parse(read_source(path), str(path), cached=True)

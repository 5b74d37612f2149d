"""Parse workload text into the AST, with positions, or positioned syntax diagnostics.

``parse(text, path)`` returns an ``ast.File`` or raises ``WorkloadError`` whose
diagnostic says what kind of syntax error it is (missing brace, missing ``=``, bad
string, stray token...), points at it, and hints at the fix.

A text is read by the recursive-descent parser of ``accelctl.dsl.descent`` (linear,
about ten times faster than lark); only a text it cannot take goes to lark's LALR
parser over ``grammar/workload.lark`` (``accelctl.dsl.lalr``, imported only then: a valid
file never imports lark), whose failure it classifies.  A text over ``MAX_SOURCE_BYTES``
is refused before either reads it (E004); files are read by ``accelctl.dsl.source``.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.dsl import ast, source
from accelctl.dsl.descent import Unparsed, parse_fast
from accelctl.dsl.source import MAX_SOURCE_BYTES, read_source  # noqa: F401 -- the names callers import from here
from accelctl.errors import WorkloadError, attach_source


def grammar_path() -> Path:
    """The grammar: ``grammar/workload.lark`` in a checkout, or the copy shipped in the wheel."""
    here = Path(__file__).resolve().parents[2] / "grammar" / "workload.lark"
    if here.is_file():
        return here
    from importlib import resources

    return Path(str(resources.files("accelctl").joinpath("_grammar", "workload.lark")))


def lark_parser():
    """The grammar's lark LALR parser (``accelctl.dsl.lalr.lark_parser``; imports lark)."""
    from accelctl.dsl.lalr import lark_parser as built

    return built()


def parse(text: str, path: str = "<input>") -> ast.File:
    """Parse a workload file.  Raises ``WorkloadError`` with one positioned diagnostic."""
    size = _size_if_large(text)
    if size > source.MAX_SOURCE_BYTES:
        raise WorkloadError(diagnostics=attach_source([source.too_large(size, path, read=size == len(text))], text))
    try:
        return parse_fast(text, path)
    except WorkloadError as exc:
        raise WorkloadError(diagnostics=attach_source(exc.diagnostics, text)) from None
    except Unparsed as exc:  # not in the language: lark says where and why, below
        where = exc.with_traceback(None)  # its frames (the fast parser's tokens) are freed first
    from accelctl.dsl.lalr import parse_refused

    return parse_refused(text, where, path)


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
    return parse(read_source(path), str(path))

"""Parse workload text into the AST, with positions, or positioned syntax diagnostics.

``parse(text, path)`` returns an ``ast.File`` or raises ``WorkloadError`` whose
diagnostic says what kind of syntax error it is (missing brace, missing ``=``, bad
string, stray token...), points at it, and hints at the fix.

The one parser is lark's LALR parser over ``grammar/workload.lark``, building the AST as
it reduces (``accelctl.dsl.lalr``).  A text over ``MAX_SOURCE_BYTES`` is refused before it
is read (E004); files are read by ``accelctl.dsl.source``.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.dsl import ast, source
from accelctl.dsl.lalr import MAX_NESTING, lark_parser, parse_text  # noqa: F401 -- names callers import from here
from accelctl.dsl.source import MAX_SOURCE_BYTES, read_source  # noqa: F401 -- the names callers import from here
from accelctl.errors import WorkloadError, attach_source


def grammar_path() -> Path:
    """The grammar: ``grammar/workload.lark`` in a checkout, or the copy shipped in the wheel
    (``accelctl/_grammar/workload.lark``, a symbolic link to it in the checkout)."""
    here = Path(__file__).resolve().parents[2] / "grammar" / "workload.lark"
    if here.is_file():
        return here
    from importlib import resources

    return Path(str(resources.files("accelctl").joinpath("_grammar", "workload.lark")))


def parse(text: str, path: str = "<input>") -> ast.File:
    """Parse a workload file.  Raises ``WorkloadError`` with one positioned diagnostic."""
    size = _size_if_large(text)
    if size > source.MAX_SOURCE_BYTES:
        raise WorkloadError(diagnostics=attach_source([source.too_large(size, path, read=size == len(text))], text))
    try:
        return ast.File(path, text, parse_text(text, path))
    except WorkloadError as exc:
        raise WorkloadError(diagnostics=attach_source(exc.diagnostics, text)) from None


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

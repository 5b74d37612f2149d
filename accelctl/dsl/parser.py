"""Parse workload text into the AST, with positions, or positioned syntax diagnostics.

``parse(text, path)`` returns an ``ast.File`` or raises ``WorkloadError`` whose
diagnostic says what kind of syntax error it is (missing brace, missing ``=``, bad
string, stray token...), points at it, and hints at the fix.

A text is read by the recursive-descent parser of ``accelctl.dsl.descent`` (linear,
about ten times faster than lark); only a text it cannot take goes to lark's LALR
parser over ``grammar/workload.lark`` (``accelctl.dsl.lalr``, imported only then: a valid
file never imports lark), whose failure it classifies.  A text over ``MAX_SOURCE_BYTES``
is refused before either reads it (E004).
"""

from __future__ import annotations

from pathlib import Path

from accelctl.dsl import ast
from accelctl.dsl.descent import Unparsed, parse_fast
from accelctl.errors import Diagnostic, Span, WorkloadError, attach_source

#: a workload file larger than this is refused before parsing (E004); the largest shipped
#: workload is 4 KB, and 16 MB validates in about 5.5 s of CPU and 600 MB of memory here
MAX_SOURCE_BYTES = 16 * 2**20


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
    if len(text) > MAX_SOURCE_BYTES:  # characters: at least as many bytes
        raise WorkloadError(diagnostics=attach_source([_too_large(len(text.encode("utf-8")), path)], text))
    try:
        return parse_fast(text, path)
    except WorkloadError as exc:
        raise WorkloadError(diagnostics=attach_source(exc.diagnostics, text)) from None
    except Unparsed as where:  # not in the language: lark says where and why
        from accelctl.dsl.lalr import parse_refused

        return parse_refused(text, where, path)


def _too_large(size: int, path: str) -> Diagnostic:
    return Diagnostic("E004", f"file is {size / 2**20:.1f} MiB, over the limit of {MAX_SOURCE_BYTES / 2**20:g} MiB "
                      f"({MAX_SOURCE_BYTES:,} bytes)", Span.point(1, 1), path,
                      "split it into several workload files")


def parse_file(path: str | Path) -> ast.File:
    """Read and parse a file; a missing or unreadable file is a diagnostic too."""
    return parse(read_source(path), str(path))


def read_source(path: str | Path) -> str:
    """A workload file's text; a missing or unreadable file raises ``WorkloadError`` (E001/E002)."""
    p = Path(path)
    try:
        if p.is_file() and p.stat().st_size > MAX_SOURCE_BYTES:  # refused unread
            raise WorkloadError(diagnostics=[_too_large(p.stat().st_size, str(path))])
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError(diagnostics=[Diagnostic("E001", f"no such file: {path}", path=str(path),
                                                    hint="check the path; workloads live in workloads/*.wl")])
    except UnicodeDecodeError as exc:
        raise WorkloadError(diagnostics=[_not_utf8(p.read_bytes(), exc, str(path))]) from None
    except (IsADirectoryError, PermissionError) as exc:
        hint = ("give a workload file (workloads/*.wl)" if isinstance(exc, IsADirectoryError)
                else "check the file's permissions")
        why = getattr(exc, "strerror", None) or exc
        raise WorkloadError(diagnostics=[Diagnostic("E002", f"cannot read {path}: {why}", path=str(path), hint=hint)])


def _not_utf8(data: bytes, exc: UnicodeDecodeError, path: str) -> Diagnostic:
    """E002 at the first byte that is not UTF-8 (line and column of the text before it)."""
    before = data[: exc.start].decode("utf-8", errors="replace")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return Diagnostic("E002", f"cannot read {path}: byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8",
                      Span.point(line, column), path, "save it as UTF-8 text")

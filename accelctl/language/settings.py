"""``--set KEY=VALUE`` on ``validate``, ``plan``, ``estimate`` and ``run``: a setting written into
the workload's text as an edit at the parser's spans, so what runs, what the run folder keeps
(``workload.wl``) and what ``--resume`` and ``estimate --calibrate`` read back are one file.

The value is parsed by the grammar (``over.parse_over``), the key path is ``sweep --over``'s.  The
edit replaces a written value or adds ``key = value`` in the block it belongs in, dropping what
it makes stale as ``sweep --over`` does.  The edited text is checked again and must equal the
setting applied to the AST (``over.apply``), else E232; a refused value is reported in the argument.
"""

from __future__ import annotations

from accelctl.dsl import ast
from accelctl.errors import Diagnostic, Span, WorkloadError
from accelctl.language import over as O
from accelctl.frozen import replace

#: the statements written ``key value`` rather than ``key = value``
STATEMENTS = ("precision", "task", "optimizer")
#: the lines appended to an edited text, one per setting: a run's ``workload.wl`` says how it
#: differs from the file, and ``run --resume`` writes the same settings into the file as it is
#: now before comparing (``recorded``)
MARK = "# accelctl --set "


def parse_sets(args: list[str]) -> list[O.Over]:
    overs, diags = [], []
    for i, a in enumerate(args):
        try:
            o = O.parse_over(a, i, flag="--set")
        except WorkloadError as exc:
            diags += exc.diagnostics
            continue
        if len(o.values) != 1:
            diags.append(Diagnostic("E231", "--set takes one value (sweep --over takes several)",
                                    Span.point(1, len(a) - len(a.partition("=")[2]) + 1, len(a.partition("=")[2])),
                                    f"--set {a}", "e.g. --set batch.micro=16", source_line=a))
            continue
        overs.append(o)
    diags += O.repeated(overs)
    if diags:
        raise WorkloadError(diagnostics=diags)
    return overs


def _offset(lines_start: list[int], line: int, column: int) -> int:
    return lines_start[line - 1] + column - 1


def _line_starts(text: str) -> list[int]:
    starts, pos = [0], 0
    for ln in text.splitlines(keepends=True):
        pos += len(ln)
        starts.append(pos)
    return starts


class _Edits:
    """Text edits at spans of the original text: (start, end, replacement)."""

    def __init__(self, text: str):
        self.text = text
        self.starts = _line_starts(text)
        self.edits: list[tuple[int, int, str]] = []

    def span(self, s: Span) -> tuple[int, int]:
        return _offset(self.starts, s.line, s.column), _offset(self.starts, s.end_line, s.end_column)

    def replace(self, s: Span, new: str) -> None:
        a, b = self.span(s)
        self.edits.append((a, b, new))

    def delete(self, s: Span) -> None:
        self.replace(s, "")

    def before_close(self, s: Span, new: str) -> None:
        """Insert ``new`` before the closing brace of the block spanning ``s``."""
        _, end = self.span(s)
        close = self.text.rfind("}", 0, end)
        self.edits.append((close, close, f" {new} "))

    def apply(self) -> str:
        out, last = [], 0
        for a, b, new in sorted(self.edits, key=lambda e: (e[0], e[1])):
            if a < last:
                raise ValueError("overlapping edits")
            out.append(self.text[last:a])
            out.append(new)
            last = b
        out.append(self.text[last:])
        return "".join(out)


def _written(key: str, rest: tuple[str, ...], value: ast.Value, top: bool = False) -> str:
    """``key = value`` (a nested path as its blocks); a workload-level statement (``top``) as
    the language writes it there: ``precision bf16``; inside a target: ``precision = bf16``."""
    if rest and O.named_block(key, rest):
        return f"{key} {rest[0]} {{ {_written(rest[1], rest[2:], value)} }}"
    if rest:
        return f"{key} {{ {_written(rest[0], rest[1:], value)} }}"
    sep = " " if top and key in STATEMENTS else " = "
    return f"{key}{sep}{ast.value_text(value)}"


def _edit_items(ed: _Edits, items, container_span: Span, path: tuple[str, ...], value: ast.Value,
                top: bool = False) -> None:
    key = path[0]
    i, rest = O.find(items, path)
    found = None if i is None else items[i]
    if found is None:
        ed.before_close(container_span, _written(key, rest, value, top))
        return
    if not rest:
        ed.replace(found.value.span if type(found) is not ast.Block else found.span,
                   ast.value_text(value) if type(found) is not ast.Block else _written(key, (), value, top))
        return
    if type(found) is ast.Block and any(i[0] == rest[0] for i in found.items):
        _edit_items(ed, found.items, found.span, rest, value)
        return
    head = found.header if type(found) is ast.Block else found.value
    if len(rest) == 1 and isinstance(head, (ast.Call, ast.Word)):
        if type(found) is ast.Block and (isinstance(head, ast.Word) or all(k.name != rest[0] for k in head.kwargs)):
            _edit_items(ed, found.items, found.span, rest, value)
            return
        call = head if isinstance(head, ast.Call) else ast.Call(head.name, (), (), head.span, head.span)
        kw = [k for k in call.kwargs if k.name != rest[0]] + [ast.KwArg(rest[0], value, value.span)]
        ed.replace(head.span, ast.value_text(call._replace(kwargs=tuple(kw))))
        return
    if type(found) is ast.Block:
        _edit_items(ed, found.items, found.span, rest, value)
        return
    ed.replace(found.span, _written(key, rest, value))


def _targets(w: ast.Workload, name: str | None = None):
    return [it for it in w.items if type(it) is ast.Block and it.kind == "target"
            and (name is None or (isinstance(it.header, ast.Word) and it.header.name == name))]


def _name(t: ast.Block) -> str:
    return t.header.name if isinstance(t.header, ast.Word) else ""


def _chosen(w: ast.Workload, path: tuple[str, ...], file: ast.File) -> tuple[str, ...] | None:
    """The targets a nested setting of a call-valued key (``parallel.stage`` of ``parallel =
    zero(stage = 3)``) goes into: those that write that key (a ``cpu`` target without
    ``parallel`` keeps none, and so does a workload of the file none of whose targets write it);
    None: every target -- a block's key (``batch.micro``), or a key no target of the file
    writes, so that the check says what is wrong with the setting."""
    if len(path) < 2:
        return None
    written = [i for v in file.workloads for t in _targets(v) for i in t.items if i[0] == path[0]]
    if not written or any(type(i) is ast.Block for i in written):
        return None  # a block (batch { micro }) every target may hold: set in each
    return tuple(_name(t) for t in _targets(w) if any(i[0] == path[0] for i in t.items))


def reshapes(o: O.Over) -> bool:
    """The setting changes what a step holds: a written ``batch { global }`` is dropped."""
    key = ".".join(o.path[2:]) if o.path[0] in ("target", "targets") and len(o.path) > 2 else o.key
    return key in O.RESHAPES_BATCH


def _drop(ed: _Edits, items, keys) -> None:
    for it in items:
        if it[0] in keys:
            ed.delete(it.span)


def _machine_dropped(ed: _Edits, t: ast.Block, path: tuple[str, ...]) -> tuple:
    """The items of target block ``t`` a setting of ``path`` edits: for ``instance``, without the
    settings the instance brings (its device, device count, price: ``over.OF_THE_INSTANCE``),
    which are deleted from the text, as ``over.apply`` leaves them out of the AST."""
    if path != ("instance",):
        return t.items
    _drop(ed, t.items, O.OF_THE_INSTANCE)
    return tuple(i for i in t.items if i[0] not in O.OF_THE_INSTANCE)


def write(text: str, file: ast.File, sets: list[O.Over], workload: str | None = None) -> str:
    """``text`` with every setting written in (see module doc) -- into workload ``workload``
    only, when given; one ``_Edits`` pass per setting, re-parsed between them so the next one
    reads the spans of the text it edits."""
    from accelctl.dsl.parser import parse

    for o in sets:
        ed = _Edits(text)
        value = o.values[0]
        for w in file.workloads:
            if workload is not None and w.name != workload:
                continue
            path = o.path
            if path[0] in ("target", "targets") and len(path) > 2:
                for t in _targets(w, path[1]):
                    _edit_items(ed, _machine_dropped(ed, t, path[2:]), t.span, path[2:], value)
            elif O.is_target_key(path):
                chosen = _chosen(w, path, file)
                for t in (t for t in _targets(w) if chosen is None or _name(t) in chosen):
                    _edit_items(ed, _machine_dropped(ed, t, path), t.span, path, value)
            else:
                _edit_items(ed, w.items, w.span, path, value, top=True)
            if reshapes(o):
                for block in [w, *_targets(w)]:
                    for b in (it for it in block.items if type(it) is ast.Block and it.kind == "batch"):
                        _drop(ed, b.items, ("global",))
        text = ed.apply()
        file = parse(text, file.path)
    return text


def applied(path: str, text: str, sets: list[O.Over], workload: str | None = None) -> str:
    """The text of the file at ``path`` with ``sets`` written in (into workload ``workload`` alone
    when the file has it, else into every workload), checked to mean what the settings applied
    to its AST mean (E232 otherwise); diagnostics of a bad value point into
    its ``--set`` argument, and so do those of a setting that names no target or key of the
    workloads (``workload``: of that one, when the file has it; ``over.check_names``)."""
    from accelctl.dsl.parser import parse
    from accelctl.language.check import check

    file = parse(text, path)
    named = [w for w in file.workloads if w.name == workload] or list(file.workloads)
    only = workload if any(w.name == workload for w in file.workloads) else None
    if unknown := O.check_names(named, sets, file_workloads=file.workloads):
        raise WorkloadError(diagnostics=unknown)
    expected_file = file
    for o in sets:
        ws = []
        for w in expected_file.workloads:
            if only is not None and w.name != only:
                ws.append(w)
                continue
            w = O.apply(w, o, o.values[0], _chosen(w, o.path, expected_file) if O.is_target_key(o.path) else None)
            ws.append(O.drop_global(w) if reshapes(o) else w)
        expected_file = _with_workloads(expected_file, ws)
    try:
        expected = [s.to_json() for s in check(expected_file)]
    except WorkloadError as exc:  # one report per argument, however many workloads and targets took it
        diags = O.relocate(list(exc.diagnostics), sets)
        seen, unique = set(), []
        for d in diags:
            key = (d.code, d.message, d.path, d.span)
            if key not in seen:
                seen.add(key)
                unique.append(d)
        raise WorkloadError(diagnostics=unique) from None
    edited = write(text, file, sets, only)
    try:
        got = [s.to_json() for s in check(parse(edited, path))]
    except WorkloadError:
        got = None
    if got == expected:
        note = "# (accelctl: the settings below, given on the command line, are written into this copy)\n"
        return edited + ("" if edited.endswith("\n") else "\n") + note + "".join(f"{MARK}{o.arg}\n" for o in sets)
    raise WorkloadError(diagnostics=[Diagnostic(
            "E232", f"--set {', '.join(o.arg for o in sets)}: the setting cannot be written into {path} as it "
            "reads (the edited file would mean something else)", None, path,
            "edit the file itself, or try sweep --over, which does not write the file")])


def recorded(text: str) -> list[str]:
    """The ``--set`` arguments an edited text records (its ``MARK`` lines), in order."""
    return [ln[len(MARK):] for ln in text.splitlines() if ln.startswith(MARK)]


def _with_workloads(file, workloads):

    return replace(file, workloads=tuple(workloads))

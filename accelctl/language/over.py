"""``--over KEY=V1,V2,...``: a setting of the language given on the command line, applied to a
parsed workload's AST as a file edit would (then checked by the same check pass).

Values are parsed by the workload grammar (as list items), never substituted into text.  Nodes
from the k-th argument carry spans on line ``OVER_LINE + k``, so a diagnostic there is rewritten
(``relocate``) to point into the argument.  Key paths: docs/cli.md, "Sweep, pick, fit"; a target
key is set in every target, any other on the workload; ``target=a,b`` picks the target a point
evaluates; a path naming nothing is refused before anything applies (``check_names``).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelctl.dsl import ast
from accelctl.dsl.lexemes import is_name
from accelctl.errors import Diagnostic, Span, WorkloadError, did_you_mean
from accelctl.language import schema as S

#: the first line number of the spans of ``--over`` argument k (OVER_LINE + k)
OVER_LINE = 1_000_000_000
#: short names of common key paths
ALIASES = {"micro": "batch.micro", "accumulation": "batch.accumulation", "compile": "optimize.compile",
           "seq_len": "dataset.seq_len", "stage": "parallel.stage", "tp": "parallel.tp", "pp": "parallel.pp"}
#: key paths that change how many samples a step takes: a written ``batch { global }`` no
#: longer holds and is dropped (the global batch follows micro x accumulation x data parallel)
RESHAPES_BATCH = ("batch.micro", "batch.accumulation", "micro_batch", "devices", "nodes", "instance", "parallel",
                  "parallel.tp", "parallel.pp", "target")
#: a target's settings that belong to its machine: set by a new ``instance`` (its device, device
#: count and price are the instance's), so an ``--over instance=`` leaves them out
OF_THE_INSTANCE = ("device", "devices", "price", "memory")
_PREFIX = "workload w { x = ["


@dataclass(frozen=True)
class Over:
    """One ``--over`` argument: the key path, its values (AST, spans inside the argument)."""

    arg: str
    key: str
    values: tuple[ast.Value, ...]
    index: int
    #: the option it came from: ``--over`` (sweep) or ``--set`` (one value, written into the file)
    flag: str = "--over"

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(ast.value_text(v) for v in self.values)

    @property
    def where(self) -> str:
        return f"{self.flag} {self.arg}"


def _diag(arg: str, code: str, message: str, column: int, hint: str = "", width: int = 1,
          flag: str = "--over") -> Diagnostic:
    return Diagnostic(code, message, Span.point(1, column, width), f"{flag} {arg}", hint, source_line=arg)


def repeated(overs: list[Over]) -> list[Diagnostic]:
    """E231 for each argument that names a key an earlier one named (``micro`` and
    ``batch.micro`` alike): the later one would silently replace the earlier's values."""
    first: dict[str, Over] = {}
    out = []
    for o in overs:
        if o.key in first:
            key_part = o.arg.partition("=")[0]
            out.append(_diag(o.arg, "E231", f"{o.key} is given twice ({first[o.key].where} and {o.where})", 1,
                             f"give it once: {o.flag} {o.key}=" + ",".join((*first[o.key].texts, *o.texts))
                             if o.flag == "--over" else f"give {o.key} once",
                             width=max(1, len(key_part)), flag=o.flag))
        else:
            first[o.key] = o
    return out


def parse_over(arg: str, index: int = 0, flag: str = "--over") -> Over:
    """``KEY=V1,V2`` -> ``Over``; ``WorkloadError`` positioned in the argument when it is not one."""
    key, eq, vals = arg.partition("=")
    key = key.strip()
    if not eq or not key or not vals.strip():
        raise WorkloadError(diagnostics=[_diag(arg, "E231", f"{flag} needs KEY=" + (
            "V1,V2,..." if flag == "--over" else "VALUE"), 1, f"e.g. {flag} batch.micro=8" + (
            ",16,32" if flag == "--over" else ""), max(len(arg), 1), flag)])
    if "\n" in arg or any(not is_name(p) for p in key.split(".")):
        bad = next((i for i, p in enumerate(key.split(".")) if not is_name(p)), 0)
        col, width = _segment(arg, bad)
        raise WorkloadError(diagnostics=[_diag(arg, "E231", f"'{key}' is not a key path", col,
                                               "a dotted path of the language's keys (ASCII letters, digits, '_', '-'; "
                                               "no empty part): batch.micro, parallel, dataset.seq_len, "
                                               "target.NAME.devices", width, flag)])
    shift = len(arg) - len(vals) - len(_PREFIX)  # text column -> argument column
    try:
        wl = _parse_values(_PREFIX + vals + "] }")
    except WorkloadError as exc:
        d = exc.diagnostics[0]
        col = max(1, min(len(arg), (d.span.column if d.span else 1) + shift))
        raise WorkloadError(diagnostics=[_diag(arg, d.code, d.message, col, d.hint, flag=flag)]) from None
    items = wl.items[0].value.items
    line = OVER_LINE + index
    values = tuple(_moved(v, line, shift) for v in items)
    if not values:
        raise WorkloadError(diagnostics=[_diag(arg, "E231", f"{flag} needs at least one value", len(arg), flag=flag)])
    return Over(arg, ALIASES.get(key, key), values, index, flag)


def _segment(arg: str, i: int) -> tuple[int, int]:
    """(column, width) of part ``i`` of the key path of ``arg`` (``target.NAME.KEY``: 1 is NAME)."""
    raw = arg.partition("=")[0]
    col = 1 + len(raw) - len(raw.lstrip())
    parts = raw.strip().split(".")
    col += sum(len(p) + 1 for p in parts[:i])
    return col, max(len(parts[i]) if i < len(parts) else 1, 1)


def _parse_values(text: str) -> ast.Workload:
    from accelctl.dsl.lalr import parse_text

    return parse_text(text, "--over")[0]


def _span(s: Span, line: int, shift: int) -> Span:
    return Span(line, s.column + shift, line, s.end_column + shift)


def _moved(v, line: int, shift: int):
    """``v`` with every span on ``line``, columns shifted into the argument."""
    if isinstance(v, ast.Call):
        return v._replace(args=tuple(_moved(a, line, shift) for a in v.args),
                          kwargs=tuple(k._replace(value=_moved(k.value, line, shift), span=_span(k.span, line, shift))
                                       for k in v.kwargs),
                          span=_span(v.span, line, shift), name_span=_span(v.name_span, line, shift))
    if isinstance(v, ast.ListV):
        return v._replace(items=tuple(_moved(i, line, shift) for i in v.items), span=_span(v.span, line, shift))
    return v._replace(span=_span(v.span, line, shift))


def relocate(diags: list[Diagnostic], overs: list[Over]) -> list[Diagnostic]:
    """Diagnostics the check pass raised at an ``--over`` value, pointed into that argument."""
    by_line = {OVER_LINE + o.index: o for o in overs}
    out = []
    for d in diags:
        o = by_line.get(d.span.line) if d.span else None
        if o is not None:
            d = Diagnostic(d.code, d.message, Span.point(1, d.span.column, d.span.end_column - d.span.column),
                           o.where, _hint(d.hint, o), d.severity, o.arg)
        out.append(d)
    return out


def _hint(hint: str, o: Over) -> str:
    """A check's "remove KEY from target T" said of the argument that wrote it there: a key
    every target took (``hpu_graphs``) is given to one target (``target.NAME.hpu_graphs``)."""
    head, sep, name = hint.partition(" from target ")
    if not (head.startswith("remove ") and sep and " " not in name):
        return hint
    if is_target_key(o.path):
        return f"{o.flag} {o.key} goes into every target: set it in the targets it is for, " \
               f"{o.flag} target.NAME.{o.key}={o.arg.partition('=')[2].strip()}"
    return f"drop {o.where} (target {name} cannot take it)"


def in_over(d: Diagnostic) -> bool:
    return d.path.startswith(("--over ", "--set "))


#: codes of a value wrong in itself (syntax, unknown key or choice, type, unit, range, device,
#: instance, engine), whatever the rest of the point: the sweep is refused, naming the argument
_CONTEXT_CODES = ("E222", "E223", "E224", "E225")


def bad_value(d: Diagnostic) -> bool:
    return (d.code[:2] in ("E0", "E1", "E2", "E3") and d.code not in _CONTEXT_CODES) or d.code in (
        "E502", "E503", "E508")


# ------------------------------------------------------------------ what a key path names

def check_names(workloads, overs: list[Over], evaluated: tuple[str, ...] | None = None,
                chosen_by: str = "", file_workloads=()) -> list[Diagnostic]:
    """Each argument whose key path names nothing the ``workloads`` have, positioned in the
    argument with a hint naming what there is (E597: no such target; E209: a target or the target
    choice where a key is meant; E202: an engine no block can be, or a workload's name).
    ``evaluated``: the targets a sweep evaluates.  A key inside a block is the check pass's to refuse.
    """
    workloads = list(workloads)
    targets = [n for w in workloads for n in _target_names(w)]
    names = tuple(dict.fromkeys(targets))
    out = []
    for o in overs:
        path = o.path
        if path[0] in ("target", "targets"):
            if len(path) == 1:
                if o.flag == "--over":
                    out += [_no_target(o, _word(v), workloads, names, _value_at(v))
                            for v in o.values if _word(v) not in names]
                else:
                    out.append(_at(o, "E209", "target is a block, not a key: a setting goes inside one target",
                                   _segment(o.arg, 0), _example(o, names)))
                continue
            name = path[1]
            if name not in names:
                out.append(_no_target(o, name, workloads, names, _segment(o.arg, 1)))
            elif evaluated is not None and name not in evaluated:
                out.append(_at(o, "E597", f"target {name} is not one this sweep evaluates "
                               f"({chosen_by or ', '.join(evaluated)}): its setting would change no row",
                               _segment(o.arg, 1), f"evaluate it too: --over target={','.join((*evaluated, name))}"))
            elif len(path) == 2:
                out.append(_at(o, "E209", f"target {name} is a block, not a key: a setting goes inside it",
                               _segment(o.arg, 1), _example(o, names)))
        elif path[0] == "engine" and len(path) > 2 and path[1] not in S.ENGINE_KEYS:
            out.append(_at(o, "E202", f"unknown engine '{path[1]}' in {o.key}", _segment(o.arg, 1),
                           did_you_mean(path[1], S.ENGINE_KEYS)))
        elif path[0] not in S.WORKLOAD_BLOCKS and path[0] not in S.WORKLOAD_KEYS and not is_target_key(path) \
                and (path[0] == "workload" or path[0] in {w.name for w in (*workloads, *file_workloads)}):
            rest = ".".join(path[1:]) or "KEY"
            pick = f"-w {path[0]} " if path[0] != "workload" else ""
            out.append(_at(o, "E202", f"'{path[0]}' is {'a workload' if pick else 'not a key'}: a key path "
                           "starts inside the workload", _segment(o.arg, 0),
                           f"{pick}{o.flag} {rest}={o.arg.partition('=')[2].strip()}"))
    return out


def _at(o: Over, code: str, message: str, at: tuple[int, int], hint: str) -> Diagnostic:
    return _diag(o.arg, code, message, at[0], hint, at[1], o.flag)


def _target_names(w: ast.Workload) -> list[str]:
    return [_name(it) for it in w.items if _is_target(it) and _name(it)]


def _word(v: ast.Value) -> str:
    return v.name if isinstance(v, ast.Word) else ast.value_text(v)


def _value_at(v: ast.Value) -> tuple[int, int]:
    return v.span.column, v.span.end_column - v.span.column


def _no_target(o: Over, name: str, workloads, names, at: tuple[int, int]) -> Diagnostic:
    """E597 in the words of ``--target T`` (``accelctl.plan.select.named_target``)."""
    whose = f"workload {workloads[0].name} has" if len(workloads) == 1 else \
        f"workloads {', '.join(w.name for w in workloads)} have"
    message = f"{whose} no target '{name}' (targets: {', '.join(names) or 'none'})"
    return _at(o, "E597", message, at, did_you_mean(name, names) if names else "")


def _example(o: Over, names) -> str:
    """How to write what a block-valued argument may have meant: a key inside one target."""
    value = o.arg.partition("=")[2].strip() or "VALUE"
    if len(o.path) == 1:  # --set target=h100
        name = value if value in names else (names[0] if names else "NAME")
        return f"-t {name} picks the target; {o.flag} target.{name}.KEY=VALUE sets a key in it"
    return f"name a key in it: {o.flag} target.{o.path[1]}.KEY={value} (devices, instance, parallel, precision, " \
           "batch.micro, ...)"


# ------------------------------------------------------------------ applying to the AST

def is_target_key(path: tuple[str, ...]) -> bool:
    """A key every target may set; ``engine.KEY`` is the workload's engine block (a target's
    ``engine`` is a name only)."""
    if path[0] == "engine" and len(path) > 1:
        return False
    return path[0] in S.TARGET_KEYS or path[0] in S.TARGET_SPECIAL


def find(items, path: tuple[str, ...]) -> tuple[int | None, tuple[str, ...]]:
    """The index of the item of ``items`` that ``path`` goes into (None: none, it is added) and
    the path left inside it: the first item of key ``path[0]``, or the block whose header
    ``path[1]`` names (``engine.slurm.partition``: the ``engine slurm`` block's partition)."""
    key, rest = path[0], path[1:]
    if len(rest) > 1:
        for i, it in enumerate(items):
            if type(it) is ast.Block and it.kind == key and isinstance(it.header, ast.Word) \
                    and it.header.name == rest[0]:
                return i, rest[1:]
        if named_block(key, rest):
            return None, rest  # engine.kubernetes.namespace beside an engine slurm { }: a block of its own
    return next((i for i, it in enumerate(items) if it[0] == key), None), rest


def apply(w: ast.Workload, over: Over, value: ast.Value, targets: tuple[str, ...] | None = None) -> ast.Workload:
    """``w`` with ``over``'s key set to ``value``: inside each target block (``targets``: those
    only) for a target key, inside ``target NAME`` for ``target.NAME.KEY``, else on the workload."""
    path = over.path
    span = value.span
    key_span = Span(span.line, 1, span.line, 1 + len(over.key))
    if path[0] in ("target", "targets") and len(path) > 2:
        return w._replace(items=tuple(_set_in_target(it, path[2:], value, key_span) if _is_target(it, path[1])
                                      else it for it in w.items))
    if is_target_key(path):
        return w._replace(items=tuple(
            _set_in_target(it, path, value, key_span) if _is_target(it) and (targets is None or _name(it) in targets)
            else it for it in w.items))
    return w._replace(items=_set(w.items, path, value, key_span))


def _name(it) -> str:
    return it.header.name if isinstance(it.header, ast.Word) else ""


def _is_target(it, name: str | None = None) -> bool:
    return type(it) is ast.Block and it.kind == "target" and (name is None or _name(it) == name)


def _set_in_target(block: ast.Block, path, value, key_span) -> ast.Block:
    items = block.items
    if path == ("instance",):
        items = tuple(i for i in items if i[0] not in OF_THE_INSTANCE)
    return block._replace(items=_set(items, path, value, key_span))


def _set(items: tuple, path: tuple[str, ...], value: ast.Value, key_span: Span) -> tuple:
    """``items`` with ``path`` set to ``value``: the item of that key replaced, or added."""
    i, rest = find(items, path)
    if i is None:
        return (*items, _new_item(path[0], rest, value, key_span))
    return (*items[:i], _set_item(items[i], rest, value, key_span), *items[i + 1:])


def _set_item(it, rest, value, key_span):
    key = it[0]
    if not rest:
        return ast.Entry(key, value, value.span, key_span) if type(it) is not ast.Statement else \
            ast.Statement(key, value, value.span, key_span)
    head = it.header if type(it) is ast.Block else it.value
    if len(rest) == 1 and isinstance(head, (ast.Call, ast.Word)) and not (
            type(it) is ast.Block and any(i[0] == rest[0] for i in it.items)):
        call = head if isinstance(head, ast.Call) else ast.Call(head.name, (), (), head.span, head.span)
        if type(it) is ast.Block and (isinstance(head, ast.Word) or all(k.name != rest[0] for k in head.kwargs)):
            return it._replace(items=_set(it.items, rest, value, key_span))  # task finetune { objective }
        kw = [k for k in call.kwargs if k.name != rest[0]] + [ast.KwArg(rest[0], value, value.span)]
        call = call._replace(kwargs=tuple(kw))
        return it._replace(header=call) if type(it) is ast.Block else it._replace(value=call)
    if type(it) is ast.Block:
        return it._replace(items=_set(it.items, rest, value, key_span))
    return _new_item(key, rest, value, key_span)  # a plain setting where a block is meant: the check says so


def _new_item(key: str, rest, value, key_span):
    if not rest:
        if key in ("precision", "task", "optimizer"):
            return ast.Statement(key, value, value.span, key_span)
        return ast.Entry(key, value, value.span, key_span)
    if named_block(key, rest):  # engine.slurm.partition: engine slurm { partition = ... }
        return ast.Block(key, ast.Word(rest[0], key_span), _set((), rest[1:], value, key_span), value.span, key_span)
    return ast.Block(key, None, _set((), rest, value, key_span), value.span, key_span)


def named_block(key: str, rest: tuple[str, ...]) -> bool:
    """``key.NAME.KEY...`` names a block headed by its name (``engine slurm { }``)."""
    return key == "engine" and len(rest) > 1 and rest[0] in S.ENGINE_KEYS


def drop_global(w: ast.Workload) -> ast.Workload:
    """``w`` without ``global`` in any ``batch { }`` (workload's and targets')."""
    def strip(items):
        out = []
        for it in items:
            if type(it) is ast.Block and it.kind == "batch":
                it = it._replace(items=tuple(i for i in it.items if i[0] != "global"))
            elif type(it) is ast.Block and it.kind == "target":
                it = it._replace(items=strip(it.items))
            out.append(it)
        return tuple(out)

    return w._replace(items=strip(w.items))

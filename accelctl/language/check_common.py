"""What every block checker of the check pass uses: index a block's items by key, coerce its
entries or a call's arguments through the value types, and record where each setting was
written.

Kept apart from ``accelctl.language.check`` so that the passes it runs (targets, dataset, stack)
can use them without importing the pass that imports them.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from accelctl.dsl import ast
from accelctl.errors import Span, did_you_mean
from accelctl.language import values as V
from accelctl.language.values import BAD, Ctx


#: a Hugging Face Hub repository id: NAME or OWNER/NAME (never a flag, never a path outside)
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")


class Origins(dict):
    """dotted setting path -> span where it was written."""

    def add(self, path: str, span: Span) -> None:
        self.setdefault(path, span)


def plain_block(it: ast.Item, ctx: Ctx, what: str, example: str) -> bool:
    """Is ``it`` a ``what { ... }`` block with nothing before its brace?  Else E209 at it, with
    ``example`` as the hint."""
    if isinstance(it, ast.Block) and it.header is None:
        return True
    ctx.error("E209", f"{what} is a block", it.span, example)
    return False


def items_by_key(items: Iterable[ast.Item], ctx: Ctx, multi: tuple[str, ...] = ()) -> dict[str, Any]:
    """Index a block's items by key, reporting duplicates (E204) except for ``multi`` kinds."""
    out: dict[str, Any] = {}
    first_of = out.setdefault
    for it in items:
        key = it[0]  # an Entry's or Statement's key, a Block's kind: the first field of each
        if multi and key in multi:
            out.setdefault(key, []).append(it)
            continue
        first = first_of(key, it)
        if first is not it:
            ctx.error("E204", f"duplicate '{key}'", it.kind_span if type(it) is ast.Block else it.key_span,
                      f"'{key}' is already set at line {first.span.line}")
    return out


def typed_entries(items: dict[str, Any], table: dict[str, V.VType], ctx: Ctx, where: str,
                  origins: Origins, prefix: str, extra_ok: Iterable[str] = ()) -> dict[str, Any]:
    """Coerce ``key = value`` entries of a block against ``table``; unknown keys are E202."""
    out: dict[str, Any] = {}
    spans = origins.setdefault  # Origins.add, inline: this runs for every entry of megabytes of workloads
    Entry = ast.Entry
    for key, it in items.items():
        if type(it) is Entry and key in table and key not in extra_ok:  # the common case, first
            val = table[key].fn(it.value, ctx, key)
            if val is not BAD:
                out[key] = val
                spans(f"{prefix}.{key}", it.span)
            continue
        if key in extra_ok:
            continue
        if key not in table:
            what = "block" if isinstance(it, ast.Block) else "key"
            code = "E201" if isinstance(it, ast.Block) else "E202"
            ctx.error(code, f"unknown {what} '{key}' in {where}", it.kind_span if isinstance(it, ast.Block)
                      else it.key_span, did_you_mean(key, {*table, *extra_ok}))
            continue
        if isinstance(it, ast.Block):
            ctx.error("E209", f"'{key}' is a setting, not a block", it.kind_span, f"write {key} = <value>")
            continue
        if isinstance(it, ast.Statement):
            ctx.error("E208", f"missing '=' after '{key}'", it.key_span,
                      f"write {key} = {ast.value_text(it.value)}")
            continue
        val = table[key].coerce(it.value, ctx, key)
        if val is not BAD:
            out[key] = val
            origins.add(f"{prefix}.{key}", it.span)
    return out


def call_kwargs(call: ast.Call, table: dict[str, V.VType], ctx: Ctx, where: str) -> dict[str, Any]:
    """Coerce the keyword arguments of ``name(k = v, ...)``; positional arguments are E214."""
    for a in call.args:
        ctx.error("E214", f"{where} takes named arguments only", a.span,
                  f"write {call.name}(name = {ast.value_text(a)})")
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for kw in call.kwargs:
        if kw.name in seen:
            ctx.error("E204", f"duplicate argument '{kw.name}' in {where}", kw.span, "keep one of them")
            continue
        seen.add(kw.name)
        if kw.name not in table:
            ctx.error("E210", f"unknown argument '{kw.name}' for {where}", kw.span, did_you_mean(kw.name, table))
            continue
        val = table[kw.name].fn(kw.value, ctx, kw.name)  # VType.coerce, inline
        if val is not BAD:
            out[kw.name] = val
    return out


def single_string_arg(call: ast.Call, ctx: Ctx, what: str) -> str | None:
    """The one string argument of ``hf("...")`` or ``local("...")``: a Hub id or a path, or None
    where it is reported."""
    if len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], ast.Str):
        ctx.error("E214", f"{call.name}(...) takes one string: the {what}", call.span,
                  f'write {call.name}("...")')
        return None
    arg = call.args[0]
    if not arg.value.strip():
        ctx.error("E304", f"the {what} must not be empty", arg.span)
        return None
    if what == "Hub id" and not HUB_ID.fullmatch(arg.value):
        ctx.error("E216", f"{ast.value_text(arg)} is not a Hugging Face Hub id", arg.span,
                  'a Hub id is NAME or OWNER/NAME of letters, digits, "_", "-", "." (e.g. "bigscience/bloomz-7b1")')
        return None
    if what != "Hub id" and (arg.value.startswith("-") or V.control_character(arg.value, lines=False)):
        ctx.error("E216", f"the {what} {ast.value_text(arg)} is not a usable path", arg.span,
                  "a path is one line without control characters and does not start with '-' "
                  "(write ./-name for a file named -name)")
        return None
    return arg.value

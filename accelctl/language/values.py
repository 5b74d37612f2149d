"""Typed values of the language: coercion of AST values, with units.

Each value type turns an ``ast.Value`` into a Python value or reports a positioned
diagnostic (and returns ``BAD``).  Units are typed: a size takes ``GB``/``GiB``..., a
duration ``s``/``ms``/``min``/``h``, a price ``usd/h``; a count of steps or tokens may
be written bare (``10``) or with its unit (``10 steps``).
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, Callable

from accelctl.dsl import ast
from accelctl.errors import Diagnostic, did_you_mean
from accelctl.frozen import Value, replace, uncompared

BAD: Any = object()

#: dimension -> unit -> factor to the base unit (bytes, seconds, USD/h, count)
UNITS: dict[str, dict[str, float]] = {
    "bytes": {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
              "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40},
    "time": {"us": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600},
    "price": {"usd/h": 1, "usd/hr": 1, "$/h": 1},
    "steps": {"step": 1, "steps": 1},
    "tokens": {"token": 1, "tokens": 1},
    "samples": {"sample": 1, "samples": 1, "sequences": 1, "images": 1},
    "bandwidth": {"Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12},
    "flops": {"GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15},
}
_BASE_UNIT = {"bytes": "B", "time": "s", "price": "usd/h", "steps": "steps", "tokens": "tokens",
              "samples": "samples", "bandwidth": "bit/s", "flops": "FLOPS"}
_DIM_OF_UNIT = {u: dim for dim, us in UNITS.items() for u in us}
_EXAMPLE = {"bytes": "96 GB", "time": "30 s", "price": "32.77 usd/h", "steps": "10 steps",
            "tokens": "100 tokens", "samples": "256 samples", "bandwidth": "400 Gbps", "flops": "989 TFLOPS"}

#: the largest value of a dimension (base units): beyond any real setting, and finite once
#: converted (``1e300 TB`` would be ``inf`` bytes)
MAX_QUANTITY: dict[str, float] = {"bytes": 2.0**70, "time": 1e9, "price": 1e9, "steps": 2.0**53,
                                  "tokens": 2.0**53, "samples": 2.0**53, "bandwidth": 1e18, "flops": 1e21}
#: the bound of a whole number without its own: the largest a JSON reader keeps exactly
MAX_WHOLE = 2**53 - 1
#: the bound of a number without its own
MAX_NUMBER = 1e15

TRUE_WORDS = {"on", "true", "yes", "enabled"}
FALSE_WORDS = {"off", "false", "no", "disabled"}


#: errors reported for one file; those past it are counted in one E006 (``Ctx.not_shown``):
#: a small file can hold so many problems that keeping and printing them all costs gigabytes
MAX_ERRORS = 1000


class Ctx:
    """Collects diagnostics for one file: the first ``MAX_ERRORS`` errors, every warning."""

    def __init__(self, path: str):
        self.path = path
        self.diags: list[Diagnostic] = []
        self.errors = 0
        self.first_dropped = None  # the span of the first error not kept

    def error(self, code: str, message: str, span, hint: str = "") -> Any:
        self.errors += 1
        if self.errors <= MAX_ERRORS:
            self.diags.append(Diagnostic(code, message, span, self.path, hint))
        elif self.first_dropped is None:
            self.first_dropped = span
        return BAD

    def not_shown(self) -> list[Diagnostic]:
        """E006 when errors past ``MAX_ERRORS`` were dropped, at the first of them; else nothing."""
        more = self.errors - MAX_ERRORS
        if more <= 0:
            return []
        return [Diagnostic("E006", f"{more:,} more error(s) in this file not shown (only the first {MAX_ERRORS:,} "
                           "are reported)", self.first_dropped, self.path,
                           "fix the errors shown (they are often one mistake repeated) and validate again")]

    def warn(self, code: str, message: str, span, hint: str = "") -> None:
        self.diags.append(Diagnostic(code, message, span, self.path, hint, severity="warning"))


def describe(v: ast.Value) -> str:
    kinds = {ast.Str: "a string", ast.Num: "a number", ast.Quantity: "a quantity", ast.Word: "a name",
             ast.Call: "a call", ast.ListV: "a list"}
    return f"{kinds[type(v)]} ({ast.value_text(v)})"


@uncompared("meaning", "unset", "lands", "read_by")
class VType(Value):
    """A value type: ``name`` for messages, ``fn(value, ctx, key)`` to coerce.

    ``detail`` states the accepted range and units for people.  In a key table of
    ``accelctl.language.schema`` a type is also the key's row (``explained``): what the key
    means, where the workload types' own default does not say it what an unwritten one does
    (``unset``), and where the table's rule does not say it where the key lands in the job
    (``lands``: ``WorkerJob`` fields; none, with ``read_by`` naming what reads it instead).
    docs/language.md is generated from these (scripts/gen_language_tables.py).
    """

    name: str
    fn: Callable[[ast.Value, Ctx, str], Any]
    detail: str = ""
    meaning: str = ""
    unset: str | None = None
    lands: tuple[str, ...] | None = None
    read_by: str = ""

    def coerce(self, v: ast.Value, ctx: Ctx, key: str) -> Any:
        return self.fn(v, ctx, key)

    def explained(self, meaning: str, unset: str | None = None, lands: tuple[str, ...] | None = None,
                  read_by: str = "") -> VType:
        """This type as one key's row: its meaning and, when given, what an unwritten key does and
        where it lands (``lands=()`` and ``read_by``: no job carries it)."""
        return replace(self, meaning=meaning, unset=unset, lands=lands, read_by=read_by)


def _range(x, lo, hi, v, ctx, key):
    """``x`` if within [lo, hi], else E304 (``x`` may be an int of thousands of digits)."""
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        bounds = f"at least {lo}" if hi is None else (f"at most {hi}" if lo is None else f"between {lo} and {hi}")
        return ctx.error("E304", f"{key} = {ast.value_text(v)} is out of range", v.span, f"{key} must be {bounds}")
    return x


def _bounds(lo, hi) -> str:
    def n(x) -> str:
        return f"{x:,}".replace(",", "_") if isinstance(x, int) else f"{x:g}"

    if lo is None and hi is None:
        return "any"
    if hi is None:
        return f"≥ {n(lo)}"
    if lo is None:
        return f"≤ {n(hi)}"
    return f"{n(lo)} to {n(hi)}"


def integer(lo: int | None = None, hi: int | None = None, unit_dim: str | None = None) -> VType:
    """A whole number, optionally written with a count unit (``10 steps``)."""

    top = MAX_WHOLE if hi is None else hi

    def fn(v, ctx, key):
        if type(v) is ast.Num:  # the common case first: a plain whole number in range
            x = v.value
            if type(x) is int and (lo is None or x >= lo) and x <= top:
                return x
        if isinstance(v, ast.Quantity):
            if unit_dim is None or _DIM_OF_UNIT.get(v.unit) != unit_dim:
                return ctx.error("E302", f"{key} takes a plain number, not {v.unit!r}", v.span,
                                 f"write {key} = {ast.number_text(v.value)}" if unit_dim is None else f"use a unit of {unit_dim}")
            x = v.value
        elif isinstance(v, ast.Num):
            x = v.value
        else:
            example = f"{key} = 8" + (f" or {key} = 8 {unit_dim}" if unit_dim else "")
            return ctx.error("E301", f"{key} must be a whole number, got {describe(v)}", v.span,
                             f"write a whole number, e.g. {example}")
        if isinstance(x, float):
            if not x.is_integer():
                return ctx.error("E306", f"{key} must be a whole number, got {x:g}", v.span,
                                 f"write {key} = {math.floor(x)} or {key} = {math.ceil(x)}")
            x = int(x)
        return _range(x, lo, top, v, ctx, key)

    units = f"; or with a unit of {unit_dim} ({', '.join(UNITS[unit_dim])})" if unit_dim else ""
    return VType("whole number", fn, _bounds(lo, hi) + units)


def number(lo: float | None = None, hi: float | None = None, positive: bool = False) -> VType:
    def fn(v, ctx, key):
        if not isinstance(v, ast.Num):
            return ctx.error("E301", f"{key} must be a number, got {describe(v)}", v.span)
        if positive and v.value <= 0:
            return ctx.error("E304", f"{key} = {v.text} is out of range", v.span, f"{key} must be greater than 0")
        top = MAX_NUMBER if hi is None else hi
        if abs(v.value) > top:  # compared before float(): an int of 400 digits has no float
            return _range(v.value, lo, top, v, ctx, key)
        return _range(float(v.value), lo, top, v, ctx, key)

    return VType("number", fn, "> 0" if positive and hi is None else
                 (f"> 0, at most {hi:g}" if positive else _bounds(lo, hi)))


def quantity(dim: str, lo: float | None = 0) -> VType:
    """A number with a unit of dimension ``dim``, converted to the base unit."""

    def fn(v, ctx, key):
        if isinstance(v, ast.Num):
            return ctx.error("E303", f"{key} needs a unit", v.span, f"write e.g. {key} = {v.text} "
                             f"{_EXAMPLE[dim].split()[1]}  (units of {dim}: {', '.join(UNITS[dim])})")
        if not isinstance(v, ast.Quantity):
            return ctx.error("E301", f"{key} must be a quantity like '{_EXAMPLE[dim]}', got {describe(v)}", v.span)
        got = _DIM_OF_UNIT.get(v.unit)
        if got != dim:
            return ctx.error("E302", f"{key} takes a unit of {dim}, not {v.unit!r} ({got})", v.span,
                             f"e.g. {key} = {_EXAMPLE[dim]}")
        factor = UNITS[dim][v.unit]
        if abs(v.value) > MAX_QUANTITY[dim] / factor:  # before multiplying: 1e300 TB is inf bytes
            return ctx.error("E304", f"{key} = {ast.value_text(v)} is out of range", v.span,
                             f"{key} must be at most {MAX_QUANTITY[dim]:g} {_BASE_UNIT[dim]}")
        x = v.value * factor
        if lo is not None and x < lo:
            return ctx.error("E304", f"{key} = {ast.value_text(v)} is out of range", v.span, f"{key} must be ≥ {lo}")
        return int(x) if dim == "bytes" else x

    return VType(f"quantity of {dim}", fn, f"units: {', '.join(UNITS[dim])}" + (f"; ≥ {lo:g}" if lo else ""))


def boolean() -> VType:
    def fn(v, ctx, key):
        if isinstance(v, ast.Word) and v.name.lower() in TRUE_WORDS | FALSE_WORDS:
            return v.name.lower() in TRUE_WORDS
        return ctx.error("E301", f"{key} must be on or off, got {describe(v)}", v.span, "write on or off")

    return VType("on/off", fn, "on, off (also true/false, yes/no, enabled/disabled)")


def string(nonempty: bool = True, lines: bool = True) -> VType:
    """Text; ``lines=False``: one line (a name, a path, a column: no tab or newline either),
    for what reaches a command line or a generated file as one word."""
    def fn(v, ctx, key):
        if not isinstance(v, ast.Str):
            hint = f'quote it: {key} = "{ast.value_text(v)}"' if isinstance(v, ast.Word) else ""
            return ctx.error("E301", f"{key} must be a string, got {describe(v)}", v.span, hint)
        if nonempty and not v.value.strip():
            return ctx.error("E304", f"{key} must not be empty", v.span)
        bad = control_character(v.value, lines)
        if bad:
            return ctx.error("E218", f"{key} holds the control character {bad}", v.span,
                             "strings may hold tabs and newlines (\\t, \\n), no other control characters"
                             if lines else f"{key} is one line: no tab, newline or other control character")
        return v.value

    return VType("string", fn, ("non-empty" if nonempty else "") + ("" if lines else ", one line"))


def name_or_string() -> VType:
    """An identifier that may be written bare or quoted (instance types, hosts)."""

    def fn(v, ctx, key):
        if isinstance(v, (ast.Str, ast.Word)):
            return v.value if isinstance(v, ast.Str) else v.name
        return ctx.error("E301", f"{key} must be a name, got {describe(v)}", v.span)

    return VType("name", fn, "bare or quoted")


def choice(*choices: str, code: str = "E203", not_these: dict[str, str] | None = None) -> VType:
    """One of ``choices``; ``not_these``: names that are not one although the language knows them
    elsewhere, each with the hint that says what it is instead."""
    def fn(v, ctx, key):
        if isinstance(v, ast.Word):
            if v.name in choices:
                return v.name
            hint = (not_these or {}).get(v.name) or did_you_mean(v.name, choices)
            return ctx.error(code, f"unknown {key} '{v.name}'", v.span, hint)
        return ctx.error("E301", f"{key} must be one of {', '.join(choices)}, got {describe(v)}", v.span)

    return VType("one of " + ", ".join(choices), fn, ", ".join(choices))


def string_list(item: str = "", example: str = "") -> VType:
    """A list of names or strings; ``item``: a pattern each must match in full (E216)."""
    rx = re.compile(item) if item else None

    def fn(v, ctx, key):
        if not isinstance(v, ast.ListV):
            return ctx.error("E301", f"{key} must be a list like [\"a\", \"b\"], got {describe(v)}", v.span)
        out = []
        for it in v.items:
            text = _text_of(it)
            if text is None:
                return ctx.error("E301", f"items of {key} must be names or strings, got {describe(it)}", it.span)
            if rx is not None and not rx.fullmatch(text):
                return ctx.error("E216", f"an item of {key} {ast.value_text(it)} is not valid here", it.span,
                                 f"items of {key} may hold {item} (e.g. {example})")
            out.append(text)
        return out

    return VType("list of names", fn, f'["a", "b"] or [a, b], each matching `{item}`' if item
                 else '["a", "b"] or [a, b]')


# ------------------------------------------------------------------ what a value names
# Engine settings reach hostfiles, batch scripts, launcher flags and API requests: each is
# checked as what it is where it is written, so a newline, a quote or a leading '-' never
# gets as far as a plan (the plan-time refusals of each engine stay as a second line).

#: C0 and C1 controls, DEL, and the Unicode line and paragraph separators (str.splitlines breaks
#: a line at them, as at \x85)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_ANY = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def control_character(text: str, lines: bool = True) -> str | None:
    """The first control character of ``text`` other than tab and newline (``lines=False``:
    tab and newline too), as ``\\xNN``."""
    m = (_CONTROL if lines else _CONTROL_ANY).search(text)
    if m is None:
        return None
    code = ord(m.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


#: what may follow '%' in an IPv6 literal (an interface name or number): ``ipaddress`` takes
#: anything there, a newline and ``slots=1`` included
_SCOPE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def is_hostname(text: str) -> bool:
    """An RFC 1123 host name (labels of letters, digits and inner '-', 253 characters at
    most), an IPv4 address, or an IPv6 address with at most a scope id of ``[A-Za-z0-9_.-]``
    (``fe80::1%eth0``): ASCII only, so what passes is one word in a hostfile, a script or argv."""
    if not text.isascii():
        return False
    address, pct, scope = text.partition("%")
    if pct and not _SCOPE_ID.fullmatch(scope):
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return not pct and _is_dns_name(text)
    return ip.version == 6 or not pct


def _is_dns_name(text: str) -> bool:
    name = text[:-1] if text.endswith(".") else text
    return 0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split("."))


def _text_of(v: ast.Value) -> str | None:
    return v.value if isinstance(v, ast.Str) else v.name if isinstance(v, ast.Word) else None


def hostname() -> VType:
    def fn(v, ctx, key):
        text = _text_of(v)
        if text is None:
            return ctx.error("E301", f"{key} must be a host name, got {describe(v)}", v.span)
        if not is_hostname(text):
            return ctx.error("E215", f"{key} {ast.value_text(v)} is not a host name or IP address", v.span,
                             "a host name is letters, digits and '-' in dot-separated labels (RFC 1123), "
                             "e.g. node-1.cluster or 10.0.0.1; an IPv6 scope id is letters, digits, '_', '.' "
                             "and '-' (fe80::1%eth0)")
        return text

    return VType("host name", fn, "RFC 1123 host name or IP address (IPv6 scope id `[A-Za-z0-9_.-]`)")


def hostname_list() -> VType:
    one = hostname()

    def fn(v, ctx, key):
        if not isinstance(v, ast.ListV):
            return ctx.error("E301", f"{key} must be a list like [\"node-1\", \"node-2\"], got {describe(v)}", v.span)
        out = [one.coerce(item, ctx, f"a host of {key}") for item in v.items]
        return BAD if any(h is BAD for h in out) else out

    return VType("list of host names", fn, '["node-1", "10.0.0.2"]: RFC 1123 host names or IP addresses '
                 '(IPv6 scope id `[A-Za-z0-9_.-]`)')


def endpoint() -> VType:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address), port 1 to 65535."""

    def fn(v, ctx, key):
        if not isinstance(v, ast.Str):
            return ctx.error("E301", f"{key} must be a string \"HOST:PORT\", got {describe(v)}", v.span)
        host, sep, port = v.value.rpartition(":")
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        ok = (sep and port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535
              and is_hostname(bare) and (bare == host) != (":" in bare))
        if not ok:
            return ctx.error("E217", f"{key} {ast.value_text(v)} is not HOST:PORT", v.span,
                             'a host name or IP address and a port 1..65535, e.g. "10.0.0.1:29400" '
                             '(IPv6: "[fd00::1]:29400")')
        return v.value

    return VType("HOST:PORT", fn, 'host name or IP address and port 1 to 65535, e.g. "10.0.0.1:29400"')


def token(pattern: str, example: str, what: str = "", bare: bool = False) -> VType:
    """A string that must match ``pattern`` in full (a queue name, an image reference...):
    E216 naming what it may hold.  ``bare``: a name may be written unquoted too."""
    rx = re.compile(pattern)

    def fn(v, ctx, key):
        text = _text_of(v) if bare else (v.value if isinstance(v, ast.Str) else None)
        if text is None:
            hint = f'quote it: {key} = "{ast.value_text(v)}"' if isinstance(v, ast.Word) else ""
            return ctx.error("E301", f"{key} must be a string, got {describe(v)}", v.span, hint)
        if not rx.fullmatch(text):
            return ctx.error("E216", f"{key} {ast.value_text(v)} is not a valid {what or key}", v.span,
                             f"{key} may hold {pattern} (e.g. {example})")
        return text

    return VType("name" if bare else "string", fn, f"{what or 'matching'} `{pattern}`")


def path() -> VType:
    """A file path: non-empty, no control character, not starting with '-'."""

    def fn(v, ctx, key):
        if not isinstance(v, ast.Str):
            return ctx.error("E301", f"{key} must be a string, got {describe(v)}", v.span)
        if not v.value.strip() or v.value.startswith("-") or control_character(v.value, lines=False):
            return ctx.error("E216", f"{key} {ast.value_text(v)} is not a usable path", v.span,
                             "a path is non-empty, has no control character and does not start with '-' "
                             "(write ./-name for a file named -name)")
        return v.value

    return VType("path", fn, "one line without control characters, not starting with '-'")


# ------------------------------------------------------------------ experiment trackers

#: the MLflow tracking URIs a workload may name (``track { mlflow = ... }``): a local sqlite
#: database, a tracking server (MLflow 3 refuses ``file:`` stores: its file backend is frozen)
TRACKING_SCHEMES = ("sqlite:///", "http://", "https://")
#: a W&B project name: W&B refuses / \\ # ? % : and names over 128 characters
WANDB_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def tracking_uri() -> VType:
    """An MLflow tracking URI of an allowed scheme (E592): ``sqlite:///PATH`` (relative to the
    workload file, ``sqlite:////abs`` absolute), ``http(s)://HOST[:PORT][/...]``."""
    from urllib.parse import urlsplit

    def fn(v, ctx, key):
        if not isinstance(v, ast.Str):
            return ctx.error("E301", f"{key} must be a string, got {describe(v)}", v.span,
                             f'write {key} = "sqlite:///mlflow.db"')
        text = v.value
        scheme = next((s for s in TRACKING_SCHEMES if text.startswith(s)), None)
        rest = text[len(scheme):] if scheme else ""
        ok = scheme is not None and rest.strip() == rest and rest and not any(c.isspace() for c in text)
        ok = ok and control_character(text) is None and not rest.startswith("-")
        if ok and scheme.startswith("http"):
            try:
                host = urlsplit(text).hostname
            except ValueError:
                host = None
            ok = host is not None and is_hostname(host)
        if not ok:
            return ctx.error("E592", f"{key} {ast.value_text(v)} is not a tracking URI accelctl logs to", v.span,
                             "write sqlite:///PATH.db (relative to the workload file; sqlite:////abs/PATH.db) "
                             "or http(s)://HOST:PORT (MLflow 3 refuses file: stores)")
        return text

    return VType("tracking URI", fn, "`sqlite:///PATH`, `http://HOST[:PORT]`, `https://...`")


def project_name() -> VType:
    """A W&B project name (E593)."""

    def fn(v, ctx, key):
        text = _text_of(v)
        if text is None:
            return ctx.error("E301", f"{key} must be a project name, got {describe(v)}", v.span,
                             f'write {key} = "my-project"')
        if not WANDB_PROJECT.fullmatch(text):
            return ctx.error("E593", f"{key} {ast.value_text(v)} is not a W&B project name", v.span,
                             "1 to 128 letters, digits, '_', '.', '-', starting with a letter or digit")
        return text

    return VType("project name", fn, f"W&B project name `{WANDB_PROJECT.pattern}`")


#: a container image reference (registry/name:tag or name@sha256:digest): the engines'
#: ``image`` settings and the stack's ``image`` read this one pattern
IMAGE = token(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}", '"nvcr.io/nvidia/pytorch:24.05-py3"', "image reference")

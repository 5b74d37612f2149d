"""The Transformer Engine releases a plan can target, by their FP8 autocast API: what
``te_version = "..."`` may name (the check pass, E203 at the value) and which API the te_fp8
backend writes for it (``accelctl.backends.te_fp8.backend.autocast_api``).  Pure data."""

from __future__ import annotations

import re

from accelctl.dsl import ast
from accelctl.language import values as V

#: FP8 autocast by TE version, newest first: (first version, function, recipe keyword).
#: TE v2.9 (70f5366) added ``autocast`` and made ``fp8_autocast`` a deprecated wrapper.
AUTOCAST_API: tuple[tuple[tuple[int, int], str, str], ...] = (
    ((2, 9), "autocast", "recipe"),
    ((0, 0), "fp8_autocast", "fp8_recipe"),
)
#: the newest major release whose API the plan knows (a 3.x may change it again)
LAST_MAJOR = 2
#: MAJOR.MINOR or MAJOR.MINOR.PATCH, as TE numbers its releases
VERSION = re.compile(r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,3}))?")
KNOWN = (f"0.0 to 2.8 (fp8_autocast), 2.9 to {LAST_MAJOR}.x (autocast), "
         "written MAJOR.MINOR or MAJOR.MINOR.PATCH")


def is_known(version: str) -> bool:
    m = VERSION.fullmatch(version)
    return m is not None and int(m.group(1)) <= LAST_MAJOR


def te_version() -> V.VType:
    """``te_version = "2.20"``: a release in ``KNOWN`` (E203 with the list otherwise)."""
    def fn(v, ctx, key):
        if not isinstance(v, ast.Str):
            return ctx.error("E301", f"{key} must be a string, got {V.describe(v)}", v.span,
                             f'write {key} = "2.20"')
        if not is_known(v.value):
            return ctx.error("E203", f"unknown {key} {ast.value_text(v)}: not a Transformer Engine release the "
                             "plan knows", v.span, f'versions the plan knows: {KNOWN}; e.g. {key} = "2.20"')
        return v.value

    return V.VType("TE version", fn, KNOWN)

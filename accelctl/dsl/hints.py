"""Hint texts the parser and the check share (importing no lark: the check runs on a parse
read back from ``accelctl.dsl.parse_cache`` without it)."""

from __future__ import annotations


def glued_hint_text(keyword: str, name: str) -> str:
    """The hint for ``keyword`` glued to ``name``: the parser's (``workloadfoo``, ``modelvit(``) and
    the check's (``targetcpu { }``: ``accelctl.language.glued``)."""
    return f"did you mean `{keyword} {name}`? (a space between the keyword and the name)"

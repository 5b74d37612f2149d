"""A keyword glued to the name after it inside a workload -- ``targetcpu { }``, ``precisionbf16``,
``enginetorchrun { }`` -- is an unknown block or key whose hint says so.  The top level's ``workloadfoo`` and a glued call
(``modelvit(...)``) are the parser's (``accelctl.dsl.lalr``); the hint's words
live in ``accelctl.dsl.hints``."""

from __future__ import annotations

from accelctl.dsl.hints import glued_hint_text
from accelctl.language import schema as S
from accelctl.models.catalog import FAMILIES


def _names() -> dict[str, tuple[str, ...] | None]:
    """Each keyword a name follows, with the names it takes (None: any name, the user's own)."""
    return {"task": S.TASK_KINDS, "model": (*FAMILIES, "hf"), "dataset": S.DATASET_SOURCES,
            "optimizer": S.OPTIMIZERS, "precision": S.PRECISIONS, "engine": S.ENGINES, "target": None}


def glued_hint(word: str) -> str | None:
    """The hint for ``word`` read as a keyword glued to its name; None when it is not one.  A
    target's name is the user's own, so any rest of two characters or more that can start a name
    counts (``targets``, one letter more, is a misspelt ``target``); the other keywords' names
    are known."""
    for keyword, known in _names().items():
        rest = word[len(keyword):]
        if not word.startswith(keyword) or not rest:
            continue
        if known is None and (len(rest) < 2 or not (rest[0].isalpha() or rest[0] == "_")):
            continue
        if known is not None and rest not in known:
            continue
        return glued_hint_text(keyword, rest)
    return None

"""Where the workload grammar is, and its text (read once a process)."""

from __future__ import annotations

import functools
from pathlib import Path


def grammar_path() -> Path:
    """The grammar: ``grammar/workload.lark`` in a checkout, or the copy shipped in the wheel
    (``accelctl/_grammar/workload.lark``, a symbolic link to it in the checkout)."""
    here = Path(__file__).resolve().parents[2] / "grammar" / "workload.lark"
    if here.is_file():
        return here
    from importlib import resources

    return Path(str(resources.files("accelctl").joinpath("_grammar", "workload.lark")))


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    return grammar_path().read_text(encoding="utf-8")

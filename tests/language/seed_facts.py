"""The seeds' facts (``seed_facts.txt``, one a line, each with the seed line that states it or
the source the seed names for a fact it leaves open), read into ``Fact`` rows for
``tests/language/test_seed_workloads.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

TABLE = Path(__file__).with_name("seed_facts.txt")


class Fact(NamedTuple):
    seed: str
    #: the seed line ("000:29"), "+source" where the seed names the source of a fact it leaves open
    line: str
    file: str
    workload: str
    #: targets the fact holds for (empty: the workload itself)
    targets: tuple[str, ...]
    where: str
    value: Any


def _row(text: str) -> Fact:
    line, workload, targets, where, value = (part.strip() for part in text.split("|"))
    file, _, name = workload.partition(":")
    return Fact(line[:3], line, file, name, () if targets == "-" else tuple(targets.split(",")), where,
                json.loads(value))


def load(path: Path = TABLE) -> dict[str, list[Fact]]:
    """seed -> its facts, in the table's order."""
    out: dict[str, list[Fact]] = {}
    for text in path.read_text(encoding="utf-8").splitlines():
        if text.strip() and not text.lstrip().startswith("#"):
            fact = _row(text)
            out.setdefault(fact.seed, []).append(fact)
    return out


SEED_FACTS = load()

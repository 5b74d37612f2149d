"""docs/language.md stays true to the code: its generated tables are fresh, every
schema key has a meaning, and every diagnostic code is documented with an example
that really produces it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_language_tables", ROOT / "scripts" / "gen_language_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_schema_key_has_a_meaning():
    assert _gen().missing_meanings() == []


def test_generated_tables_are_fresh():
    gen = _gen()
    current = gen.DOC.read_text(encoding="utf-8")
    assert gen.render(current) == current, "docs/language.md is stale: run scripts/gen_language_tables.py"


def test_every_code_is_documented_with_a_working_example():
    gen = _gen()
    documented = [code for code, *_ in gen.DIAGNOSTICS]
    assert len(documented) == len(set(documented))
    emitted = set()
    # the workload's codes, and accelctl compare's refusals (E226, E227)
    for src in [*sorted((ROOT / "accelctl/dsl").glob("*.py")), *sorted(p for d in ("language", "workload", "models") for p in (ROOT / "accelctl" / d).glob("*.py")),
                ROOT / "accelctl/catalog.py",
                ROOT / "accelctl/analysis/compare.py"]:
        emitted |= set(re.findall(r'"([EW]\d{3})"', src.read_text(encoding="utf-8")))
    assert set(documented) == emitted
    for code, _, example, mode in gen.DIAGNOSTICS:
        assert gen.run_example(code, example, mode)  # raises when the example does not produce its code

"""The suite's scheduling list (tests/conftest.py ``LONGEST``): each entry names a test file
that exists and, where it names a test, a test that file defines -- a renamed or removed
test would otherwise drop silently to the end of the queue, where one long test keeps one
xdist worker busy while the other has nothing left."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _longest() -> tuple[str, ...]:
    """``LONGEST`` of tests/conftest.py (by its path: each test folder has a ``conftest``)."""
    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LONGEST


def test_every_longest_entry_names_an_existing_test():
    for entry in _longest():
        file, _, name = entry.partition("::")
        path = ROOT / file
        assert path.is_file(), entry
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", path.read_text(encoding="utf-8"), re.M), entry

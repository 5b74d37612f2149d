"""The one rule for every golden file of the suite (issue 28 item 4).

``ACCELCTL_UPDATE_GOLDEN=1`` -- exactly ``1``; ``0``, ``yes``, ``true`` or an empty value
compare as a run without it does -- is update mode.  In both modes each golden is compared
with what the code produces now:

* compare mode: a missing, different or stale golden file fails the test, naming the file
  and the variable that rewrites it;
* update mode: a missing or different golden is written, a stale one removed, and each
  such change is reported as a ``GoldenUpdated`` warning (pytest's warnings summary lists
  them) -- the rest of the test still runs and still asserts, so an update run is no
  blind pass.  The TUI's SVG snapshots follow the same variable (tests/conftest.py turns
  on syrupy's ``--snapshot-update`` with it).

A golden folder's stale check is ``check_no_stale``: the files a folder holds must be
exactly the ones its tests write.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

VARIABLE = "ACCELCTL_UPDATE_GOLDEN"
ROOT = Path(__file__).resolve().parents[1]


def updating() -> bool:
    """Update mode: the variable is exactly "1"."""
    return os.environ.get(VARIABLE) == "1"


class GoldenUpdated(UserWarning):
    """A golden file written, rewritten or removed in update mode."""


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def check_golden(path: Path, text: str, same: Callable[[str, str], bool] | None = None) -> None:
    """``text`` against the golden file ``path`` (``same(text, golden)`` where plain equality
    is too strict, e.g. JSON compared as data)."""
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if old is not None and (same(text, old) if same else text == old):
        return
    if not updating():
        assert old is not None, f"no golden file {_shown(path)}; run with {VARIABLE}=1 to write it"
        assert text == old, f"{_shown(path)} differs; if the change is intended, rerun with {VARIABLE}=1"
        raise AssertionError(f"{_shown(path)} differs; if the change is intended, rerun with {VARIABLE}=1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    warnings.warn(GoldenUpdated(f"{'wrote' if old is None else 'rewrote'} {_shown(path)}"), stacklevel=2)


def check_no_stale(folder: Path, pattern: str, live: Iterable[str]) -> None:
    """Every file of ``folder`` matching ``pattern`` is one of ``live`` (the names its tests
    write); a stale one fails, or is removed in update mode."""
    live = set(live)
    stale = sorted(p for p in folder.glob(pattern) if p.is_file() and p.name not in live)
    if stale and updating():
        for p in stale:
            p.unlink()
            warnings.warn(GoldenUpdated(f"removed stale {_shown(p)}"), stacklevel=2)
        return
    assert not stale, (f"stale golden files (no test writes them): {[_shown(p) for p in stale]}; "
                       f"{VARIABLE}=1 removes them")

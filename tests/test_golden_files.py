"""The one golden-update rule (tests/golden_files.py): exactly ``ACCELCTL_UPDATE_GOLDEN=1``
updates; any other value compares and fails as a run without the variable does."""

from __future__ import annotations

import pytest
from golden_files import GoldenUpdated, check_golden, check_no_stale


@pytest.mark.parametrize("value", [None, "", "0", "yes", "true", "1 ", "01"])
def test_anything_but_exactly_1_compares_and_fails(tmp_path, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("ACCELCTL_UPDATE_GOLDEN", raising=False)
    else:
        monkeypatch.setenv("ACCELCTL_UPDATE_GOLDEN", value)
    golden = tmp_path / "a.txt"
    with pytest.raises(AssertionError, match="no golden file .*ACCELCTL_UPDATE_GOLDEN=1"):
        check_golden(golden, "new\n")
    assert not golden.exists()
    golden.write_text("old\n")
    with pytest.raises(AssertionError, match="differs; if the change is intended"):
        check_golden(golden, "new\n")
    assert golden.read_text() == "old\n"
    check_golden(golden, "old\n")  # equal: passes
    (tmp_path / "gone.txt").write_text("x")
    with pytest.raises(AssertionError, match="stale golden files .*gone.txt"):
        check_no_stale(tmp_path, "*.txt", {"a.txt"})
    assert (tmp_path / "gone.txt").exists()


def test_update_mode_writes_what_differs_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELCTL_UPDATE_GOLDEN", "1")
    same, changed, new = tmp_path / "same.txt", tmp_path / "changed.txt", tmp_path / "sub" / "new.txt"
    same.write_text("s\n")
    changed.write_text("old\n")
    with pytest.warns(GoldenUpdated) as record:
        check_golden(same, "s\n")
        check_golden(changed, "new\n")
        check_golden(new, "n\n")
    assert [str(w.message).split(" ")[0] for w in record] == ["rewrote", "wrote"]  # the equal one: no warning
    assert (same.read_text(), changed.read_text(), new.read_text()) == ("s\n", "new\n", "n\n")
    (tmp_path / "stale.txt").write_text("x")
    with pytest.warns(GoldenUpdated, match="removed stale .*stale.txt"):
        check_no_stale(tmp_path, "*.txt", {"same.txt", "changed.txt"})
    assert sorted(p.name for p in tmp_path.glob("*.txt")) == ["changed.txt", "same.txt"]


def test_a_custom_equality_still_fails_what_differs(tmp_path, monkeypatch):
    monkeypatch.delenv("ACCELCTL_UPDATE_GOLDEN", raising=False)
    golden = tmp_path / "a.json"
    golden.write_text('{"a": 1}')
    check_golden(golden, '{ "a" : 1 }', same=lambda new, old: new.replace(" ", "") == old.replace(" ", ""))
    with pytest.raises(AssertionError):
        check_golden(golden, '{"a": 2}', same=lambda new, old: new.replace(" ", "") == old.replace(" ", ""))

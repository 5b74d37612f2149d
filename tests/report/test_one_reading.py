"""One reading of a run folder: ``runs``, ``status``, ``report`` and ``compare`` call a run with a
truncated (or otherwise broken) ``summary.json`` unreadable for the same reason, and ``compare``
refuses it (exit 2), ``--force`` or not -- it never prints figures from its events."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from accelctl.cli import main

RUNS = Path(__file__).resolve().parent / "fixtures" / "store"
GOOD = "20260101-000000-fixture_train-small-0001"


def _cli(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("damage", ["truncated", "not an object", "a FIFO"])
def test_every_verb_calls_a_broken_summary_unreadable_for_the_same_reason(tmp_path, capsys, damage):
    import os

    store = tmp_path / "runs"
    store.mkdir()
    a, b = store / GOOD, store / GOOD.replace("0001", "0002")
    shutil.copytree(RUNS / GOOD, a)
    shutil.copytree(RUNS / GOOD, b)
    summary = b / "summary.json"
    if damage == "truncated":
        summary.write_bytes(summary.read_bytes()[:40])
    elif damage == "not an object":
        summary.write_text("[1, 2]")
    else:
        summary.unlink()
        os.mkfifo(summary)
    _, runs = _cli(capsys, "runs", "--runs-dir", str(store))
    listed = {r["id"]: r["status"] for r in runs["result"]["runs"]}
    reason = listed[b.name]
    assert reason.startswith("unreadable: ") and listed[a.name] == "ok"
    _, status = _cli(capsys, "status", b.name, "--runs-dir", str(store))
    assert status["result"]["runs"][0]["state"] == reason
    for force in ((), ("--force",)):
        code, doc = _cli(capsys, "compare", a.name, b.name, "--runs-dir", str(store), *force)
        assert code == 2 and doc["result"] == {}, doc
        assert [d["code"] for d in doc["diagnostics"]] == ["E226"]
        assert doc["diagnostics"][0]["message"] == f"not compared: B ({b.name}) is {reason}"
    code = main(["report", b.name, "--runs-dir", str(store)])
    assert f"run {b.name} is {reason} (left out of the report)" in capsys.readouterr().err

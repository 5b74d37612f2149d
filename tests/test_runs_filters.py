"""``accelctl runs`` filters (--workload, --target, --status, --since) applied before the
table, and a store folder named that does not exist said so (accelctl.cli.runs)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelctl.cli.run_times import since

ROOT = Path(__file__).parents[1]
STORE = ROOT / "tests" / "report" / "fixtures" / "store"


def accelctl(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "ACCELCTL_RUNS_DIR"}
    full.update(PYTHONPATH=str(ROOT), COLUMNS="100", **(env or {}))
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *argv], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=120)


def listed(*argv: str, store: Path = STORE) -> list[str]:
    proc = accelctl("runs", "--runs-dir", str(store), "--json", *argv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sorted(r["id"][-4:] for r in json.loads(proc.stdout)["result"]["runs"])


def test_each_filter_and_their_conjunction():
    assert listed() == ["0001", "0002", "0003", "0004", "0005"]
    assert listed("--workload", "fixture_gen") == ["0005"]
    assert listed("-w", "fixture_t*") == ["0001", "0002", "0003", "0004"]
    assert listed("--target", "small") == ["0001", "0004"]
    assert listed("--status", "failed") == ["0004"]
    assert listed("--status", "failed,ok", "-t", "small") == ["0001", "0004"]
    assert listed("-w", "fixture_train", "-t", "big*", "-s", "ok") == ["0002", "0003"]


def test_since_an_age_and_an_iso_date(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    now = time.time()
    for suffix, age_h in (("0001", 1), ("0002", 30), ("0003", 24 * 10)):  # the others stay in January 2026
        summary = next(store.glob(f"*-{suffix}")) / "summary.json"
        data = json.loads(summary.read_text())
        data["started_unix_s"] = now - age_h * 3600
        summary.write_text(json.dumps(data))
    assert listed("--since", "12h", store=store) == ["0001"]
    assert listed("--since", "2d", store=store) == ["0001", "0002"]
    assert listed("--since", "1w", "-s", "ok", store=store) == ["0001", "0002"]
    assert listed("--since", "2026-01-01", store=store) == ["0001", "0002", "0003", "0004", "0005"]
    assert listed("--since", "2026-01-01T00:00:01", store=store) == ["0001", "0002", "0003"]


def test_the_table_lists_only_the_runs_that_pass():
    proc = accelctl("runs", "--runs-dir", str(STORE), "--status", "failed")
    assert proc.returncode == 0 and "runs (1)" in proc.stdout and "0004" in proc.stdout, proc.stdout
    none = accelctl("runs", "--runs-dir", str(STORE), "--workload", "nothing_like_it")
    assert none.returncode == 0 and "no runs match the filters (5 stored run(s) do not)" in none.stdout


def test_since_parses_ages_and_dates():
    assert since("2d", now=1_000_000.0) == 1_000_000.0 - 2 * 86400
    assert since("90m", now=10_000.0) == 10_000.0 - 5400
    assert since("2026-01-01") == 1767225600.0
    assert since("2026-01-01T01:00+01:00") == 1767225600.0
    for bad in ("2x", "yesterday", "-2d", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            since(bad)


@pytest.mark.parametrize("argv", [["--since", "2x"], ["--status", "done"]])
def test_a_bad_filter_is_a_usage_error(argv):
    proc = accelctl("runs", "--runs-dir", str(STORE), *argv)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert argv[0] in proc.stderr


def test_a_runs_dir_that_does_not_exist_is_named(tmp_path):
    missing = tmp_path / "nonexistent"
    proc = accelctl("runs", "--runs-dir", str(missing))
    assert proc.returncode == 2
    assert f"no run store at {missing} (--runs-dir): the folder does not exist" in proc.stderr
    assert "./runs" not in proc.stdout + proc.stderr
    by_env = accelctl("runs", env={"ACCELCTL_RUNS_DIR": str(missing)})
    assert by_env.returncode == 2 and "($ACCELCTL_RUNS_DIR)" in by_env.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    fresh = accelctl("runs", "--runs-dir", str(empty))
    assert fresh.returncode == 0 and f"no runs yet in {empty}" in fresh.stdout

"""Fuzz: mutated and special-file run folders through every store command (issue 22).

A store holds the report fixtures' finished runs and a real lost run (its runner dead, no
summary: tests/run/test_store_hostile.py).  Copies of them are broken, one to three files each
(``summary.json``, ``runner.json``, ``plan.json``, ``job.json``, ``jobs.json``, ``spec.json``,
``series.json``, ``scheduler.json``, ``events.jsonl``, ``rank0.jsonl``, ``workload.wl``,
``worker.log``):

* special files: a FIFO, a link to ``/dev/zero``, a link loop, a link out of the folder, a
  directory, a 16 GiB sparse file, an empty file;
* contents: random bytes, bytes that are not UTF-8, the file cut at a random point, a random
  JSON value (NaN, infinities, huge integers, deep nesting included) in place of the file, or set
  at a random key of its object or of one event line.

Then every store command runs over the store as a real CLI process (``runs``, ``runs --wide``,
``runs --json``, ``report --all``, ``report IDS``, ``report -f json``, ``compare ID GOOD`` and
``run --resume ID`` for each broken run, the shells' completion of run ids): none may take more
than ``HANG_S`` seconds, print a traceback or exit 70; each broken run is listed, and one with
a special file in place of a store file is ``unreadable: <reason>``.

The fast tier is one fixed sweep (every special kind, a dozen files: ~15 processes); the
hypothesis part (``@pytest.mark.slow``) draws ``FUZZ_STORES`` stores of ``FUZZ_RUNS`` broken runs
each (120 broken runs: fewer, larger stores than 40 of 3, for the same runs in 40 % fewer processes),
``compare`` and ``run --resume`` of ``FUZZ_RESUMED`` of each store's runs (40 of each).
The figures are printed: ``pytest -s tests/run/test_store_fuzz.py``.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_store_faults import FIXTURES, GOOD
from test_store_hostile import _make_lost

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 10.0
FUZZ_STORES = 10
#: broken runs in each fuzzed store
FUZZ_RUNS = 12
#: of which ``compare`` and ``run --resume`` get (two processes each run: 240 of the 310
#: processes when each got them; every run is still listed and reported)
FUZZ_RESUMED = 4
FILES = ["summary.json", "runner.json", "plan.json", "job.json", "jobs.json", "spec.json", "series.json",
         "scheduler.json", "events.jsonl", "rank0.jsonl", "workload.wl", "worker.log"]
SPECIAL = {
    "fifo": os.mkfifo,
    "/dev/zero": lambda p: p.symlink_to("/dev/zero"),
    "link loop": lambda p: p.symlink_to(p.name),
    "link out": lambda p: p.symlink_to(FIXTURES / GOOD / "summary.json"),
    "directory": Path.mkdir,
    "huge": lambda p: _sparse(p, 16 * 2**30),
    "empty": lambda p: p.write_bytes(b""),
}
#: special kinds that make the run unreadable whatever the file (an empty file may be fine: worker.log)
UNREADABLE_KINDS = {"fifo", "/dev/zero", "link loop", "link out", "directory", "huge"}
HOSTILE_JSON = [float("nan"), float("inf"), -float("inf"), 10**30, -(10**30), -1, 0, 1e999, "x", "", [], {}, None,
                True, [["deep"]] * 3, {"a": {"b": {"c": [1e308, -0.0]}}}]


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _templates(make_plan, tmp_path_factory) -> list[Path]:
    lost = _make_lost(make_plan, tmp_path_factory.mktemp("fuzzlost"))
    return [FIXTURES / GOOD, FIXTURES / "20260101-000400-fixture_gen-cpu-0005", lost]


def _json_values():
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**80), 2**80), st.floats(allow_nan=True),
                     st.text(max_size=8), st.sampled_from(HOSTILE_JSON[:8]))
    return st.recursive(leaf, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                     st.dictionaries(st.text(max_size=6), kids, max_size=3)),
                        max_leaves=8)


def _set_somewhere(data, value, rnd: random.Random):
    """``data`` (a JSON object) with ``value`` at a random key path of it."""
    node = data
    while isinstance(node, dict) and node:
        key = rnd.choice(sorted(node))
        if not isinstance(node[key], dict) or rnd.random() < 0.4:
            node[key] = value
            return data
        node = node[key]
    if isinstance(node, dict):
        node["status"] = value
    return data


def mutate(path: Path, how: str, rnd: random.Random, value=None, blob: bytes = b"") -> None:
    """Break ``path`` (a file of a run folder, present or not) ``how``."""
    if how in SPECIAL:
        _remove(path)
        SPECIAL[how](path)
        return
    regular = path.is_file() and not path.is_symlink() and path.stat().st_size < 2**26
    old = path.read_bytes() if regular else b""
    if how == "bytes":
        new = blob
    elif how == "not utf-8":
        cut = rnd.randrange(len(old) + 1)
        new = old[:cut] + b"\xff\xfe\xc3" + old[cut:]
    elif how == "cut":
        new = old[: rnd.randrange(len(old) + 1)]
    elif how == "value":
        new = json.dumps(value, allow_nan=True).encode()
    else:  # "field": a value at a random key, of the object or of one line of a JSONL file
        lines = old.split(b"\n")
        filled = [i for i, line in enumerate(lines) if line.strip()] or [0]
        i = rnd.choice(filled) if path.suffix == ".jsonl" else None
        try:
            data = json.loads(lines[i] if i is not None else old)
        except ValueError:
            data = {}
        data = _set_somewhere(data if isinstance(data, dict) else {}, value, rnd)
        text = json.dumps(data, allow_nan=True).encode()
        if i is not None:
            lines[i] = text
            new = b"\n".join(lines)
        else:
            new = text
    _remove(path)
    path.write_bytes(new)


def build(root: Path, templates: list[Path], broken: list[tuple[int, list[tuple[str, str, object, bytes]]]],
          rnd: random.Random) -> list[tuple[str, bool]]:
    """A store: the first template as GOOD, and one broken copy per ``broken`` entry (template
    index, [(file, how, value, bytes)]); returns the broken runs' ids and whether one of their
    files is special (the run must then be unreadable)."""
    shutil.copytree(templates[0], root / GOOD)
    out = []
    for n, (t, changes) in enumerate(broken):
        run_id = f"20260102-{n:06d}-fuzz-m{n}-{n:04x}"
        shutil.copytree(templates[t], root / run_id, symlinks=True)
        last: dict[str, str] = {}  # each file's last change: a later one replaces a special file by a plain one
        for name, how, value, blob in changes:
            mutate(root / run_id / name, how, rnd, value, blob)
            last[name] = how
        special = any(how in UNREADABLE_KINDS and (name, how) != ("worker.log", "huge")  # only its tail is read
                      for name, how in last.items())
        out.append((run_id, special))
    return out


def cli(root: Path, *argv: str) -> tuple[int, str, float]:
    t0 = time.monotonic()
    try:
        cp = subprocess.run([sys.executable, "-m", "accelctl.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                            timeout=HANG_S, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"accelctl {' '.join(argv)} hung (> {HANG_S} s) on the store {root}")
    took = time.monotonic() - t0
    out = cp.stdout + cp.stderr
    assert "Traceback" not in out and cp.returncode != 70, f"accelctl {' '.join(argv)}:\n{out[-3000:]}"
    return cp.returncode, cp.stdout, took


def every_command(root: Path, runs: list[tuple[str, bool]], resume_and_compare: list[str] | None = None) -> dict:
    """Every store command over ``root``; the figures (processes, slowest)."""
    d = ["--runs-dir", str(root)]
    ids = [r for r, _ in runs]
    took = []
    for argv in (["runs", *d], ["runs", "--wide", *d], ["report", "--all", *d], ["report", *ids, *d],
                 ["report", "--all", "-f", "json", *d], ["__complete", "runs", str(root)]):
        took.append(cli(root, *argv)[2])
    code, out, t = cli(root, "runs", "--json", *d)
    took.append(t)
    listed = {r["id"]: r["status"] for r in json.loads(out)["result"]["runs"]}
    for run_id, special in runs:
        assert run_id in listed, f"{run_id} not listed"
        if special:
            assert listed[run_id].startswith("unreadable: "), (run_id, listed[run_id])
    for run_id in ids if resume_and_compare is None else resume_and_compare:
        code, _, t = cli(root, "compare", run_id, GOOD, *d)
        took.append(t)
        assert code in (0, 2)
        code, _, t = cli(root, "run", "--resume", run_id, *d)
        took.append(t)
        assert code in (1, 2)  # none of them can be resumed: refused, with its reason
    return {"processes": len(took), "slowest_s": max(took)}


@pytest.mark.slow
def test_every_special_file_through_every_store_command(make_plan, tmp_path, tmp_path_factory):
    """The fast tier: each special kind in place of a different store file of the lost run."""
    templates = _templates(make_plan, tmp_path_factory)
    rnd = random.Random(22)
    kinds = sorted(SPECIAL)
    broken = [(2, [(name, kinds[i % len(kinds)], None, b"")]) for i, name in enumerate(FILES)]
    broken += [(0, [("summary.json", "field", float("nan"), b""), ("events.jsonl", "field", -1, b"")]),
               (1, [("events.jsonl", "not utf-8", None, b""), ("spec.json", "value", [1], b"")])]
    runs = build(tmp_path / "runs", templates, broken, rnd)
    picked = [runs[0][0], runs[7][0], runs[-1][0]]  # compare and resume: three of them
    figures = every_command(tmp_path / "runs", runs, picked)
    print(f"store fuzz, fixed sweep: {len(runs)} broken runs, {figures['processes']} processes, "
          f"slowest {figures['slowest_s']:.2f} s")


_CHANGE = st.tuples(st.sampled_from(FILES),
                    st.sampled_from([*SPECIAL, "bytes", "not utf-8", "cut", "value", "field", "field"]),
                    _json_values(), st.binary(max_size=64))
_STORE = st.lists(st.tuples(st.integers(0, 2), st.lists(_CHANGE, min_size=1, max_size=3)), min_size=FUZZ_RUNS,
                  max_size=FUZZ_RUNS)


@pytest.mark.slow
def test_fuzzed_run_folders_through_every_store_command(make_plan, tmp_path, tmp_path_factory):
    templates = _templates(make_plan, tmp_path_factory)
    count = {"stores": 0, "processes": 0, "slowest_s": 0.0}
    t0 = time.monotonic()

    @settings(max_examples=FUZZ_STORES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(broken=_STORE, seed=st.integers(0, 2**32))
    def one_store(broken, seed):
        root = tmp_path / f"store{count['stores']}"
        count["stores"] += 1
        rnd = random.Random(seed)
        runs = build(root, templates, broken, rnd)
        figures = every_command(root, runs, rnd.sample([r for r, _ in runs], FUZZ_RESUMED))
        count["processes"] += figures["processes"]
        count["slowest_s"] = max(count["slowest_s"], figures["slowest_s"])
        shutil.rmtree(root, ignore_errors=True)

    one_store()
    print(f"store fuzz: {count['stores']} stores of {FUZZ_RUNS} broken runs, {count['processes']} CLI processes, "
          f"0 tracebacks, 0 hangs, slowest {count['slowest_s']:.2f} s, {time.monotonic() - t0:.0f} s in all")
    assert count["stores"] == FUZZ_STORES and not math.isnan(count["slowest_s"])

"""A real 1-vs-2-process scaling sweep on CPU: `accelctl sweep` plans the target at each
device count, runs it (the 2-process point through torchrun, gloo), stores both runs and
prints the efficiency table computed from what they measured."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from accelctl.decide.sweep import parse_counts, sweep_targets
from accelctl.frozen import replace

WORKLOAD = Path(__file__).parent / "fixtures" / "tiny_sweep.wl"


def test_parse_counts_and_targets():
    from accelctl.api import load

    assert parse_counts("1, 2,2,4") == [1, 2, 4]
    with pytest.raises(ValueError):
        parse_counts("0")
    (spec,) = load(WORKLOAD)
    base = replace(spec.target("cpu"), price_per_hour=2.0)
    t1, t2, t3 = sweep_targets(base, [1, 2], [1, 2])[:3]
    assert (t1.devices, t1.nodes, t1.price_per_hour, t1.batch.global_size) == (1, 1, 2.0, None)
    assert (t3.devices, t3.nodes, t3.price_per_hour) == (1, 2, 4.0)  # price scales with nodes
    assert t2.batch.micro == base.batch.micro  # weak scaling: the per-device batch stays


@pytest.mark.slow
def test_real_sweep_1_vs_2_processes(tmp_path, capsys):
    from accelctl.cli import main
    from accelctl.run.store import list_runs

    code = main(["sweep", str(WORKLOAD), "--target", "cpu", "--devices", "1,2", "--runs-dir", str(tmp_path),
                 "--format", "csv"])
    out = capsys.readouterr().out
    assert code == 0, out
    runs = list_runs(tmp_path)
    assert len(runs) == 2 and {r.status for r in runs} == {"ok"}
    assert sorted(r.summary["world_size"] for r in runs) == [1, 2]
    assert {r.backend for r in runs} == {"cpu", "torchrun"}  # what plan chooses for 1 and for 2 processes

    rows = list(csv.DictReader(io.StringIO(out)))  # one CSV table; its "table" column groups the rows
    blocks = [[r for r in rows if r["table"] == t] for t in dict.fromkeys(r["table"] for r in rows)]
    scaling = next(b for b in blocks if b[0]["table"].startswith("scaling-tiny_sweep"))
    one, two = sorted(scaling, key=lambda r: int(r["accelerators"]))
    assert (one["accelerators"], two["accelerators"]) == ("1", "2")
    thr1, thr2 = float(one["throughput"]), float(two["throughput"])
    assert thr1 > 0 and thr2 > 0
    assert float(one["efficiency"]) == 1.0
    assert float(two["efficiency"]) == pytest.approx((thr2 / 2) / thr1, rel=1e-9)
    report = next(b for b in blocks if b[0]["table"] == "report-tiny_sweep")
    assert sorted(int(r["batch"]) for r in report) == [4, 8]  # micro 4 per device, global grows
    # both spec.json files record the device count each run had
    assert sorted(r.path.joinpath("spec.json").read_text().count('"devices": 2') for r in runs) == [0, 1]
    # no wall-clock bound: speed goals live in bench/ (a loaded machine took 85 s here, an idle one 30 s)

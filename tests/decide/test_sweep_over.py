"""``accelctl sweep FILE --over KEY=V1,V2 --estimate | --run``: any setting, as a file edit would set it.

Each point's estimate is compared with the estimate of the same workload written to a file
with that setting (the file edit the sweep stands for); bad values are refused at the
argument (``--over ...:1:COL: error[CODE]``), never a traceback; rules the point breaks are
that point's row; the Pareto front is the rows no other row beats in time and cost.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from accelctl.cli import main

ROOT = Path(__file__).resolve().parents[2]
VIT = str(ROOT / "workloads" / "vit_fp8.wl")
TINY = Path(__file__).parent / "fixtures" / "tiny_sweep.wl"


def _csv(out: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(out)))


def _estimate_of(text: str, tmp_path, target: str) -> dict:
    from accelctl.api import estimate_targets, load

    f = tmp_path / "edited.wl"
    f.write_text(text)
    (spec,) = load(f)
    return estimate_targets(spec, [spec.target(target)])[0].record()


def test_grid_points_equal_the_file_edit(tmp_path, capsys):
    code = main(["sweep", VIT, "-t", "p5_te", "--over", "precision=bf16,fp8", "--over", "batch.micro=64,128",
                 "--estimate", "--csv"])
    rows = _csv(capsys.readouterr().out)
    assert code == 0
    assert [(r["over.precision"], r["over.batch.micro"]) for r in rows] == [
        ("bf16", "64"), ("bf16", "128"), ("fp8", "64"), ("fp8", "128")]
    text = Path(VIT).read_text()
    # the file edit, made by the other writer of settings (--set: spans of the text, accelctl.language.settings):
    # p5_te's own precision and batch written in its block
    from accelctl.language import settings

    edited = settings.applied(VIT, text, settings.parse_sets(["target.p5_te.precision=fp8",
                                                              "target.p5_te.batch.micro=64"]))
    assert edited != text and "precision = fp8" in edited
    want = _estimate_of(edited, tmp_path, "p5_te")
    got = next(r for r in rows if (r["over.precision"], r["over.batch.micro"]) == ("fp8", "64"))
    assert float(got["step_time_s"]) == pytest.approx(want["step_time_s"], rel=1e-9)
    assert float(got["throughput"]) == pytest.approx(want["throughput"], rel=1e-9)
    assert got["bound_by"] == want["bound_by"]
    # fp8 is faster than bf16 at each micro-batch, by the estimate's own model
    by = {(r["over.precision"], r["over.batch.micro"]): float(r["step_time_s"]) for r in rows}
    assert by[("fp8", "64")] < by[("bf16", "64")] and by[("fp8", "128")] < by[("bf16", "128")]


def test_zip_pairs_and_target_key(capsys):
    code = main(["sweep", VIT, "--over", "target=p4d,p5_bf16", "--over", "batch.micro=32,64", "--zip",
                 "--estimate", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    pts = doc["result"]["points"]
    assert [(p["target"], p["over.batch.micro"]) for p in pts] == [("p4d", "32"), ("p5_bf16", "64")]


def test_zip_needs_as_many_values(capsys):
    code = main(["sweep", VIT, "--over", "batch.micro=1,2", "--over", "precision=bf16", "--zip", "--estimate"])
    assert code == 2
    assert "--zip pairs" in capsys.readouterr().err


@pytest.mark.parametrize("arg, code_, column", [
    ("batch.micro=64,0", "E304", 16),          # out of range: the second value
    ("batch.mikro=8", "E202", 1),              # unknown key: at the key
    ("precision=bf16,bf61", "E203", 16),       # unknown choice
    ("devices=two", "E301", 9),                # wrong type
    ("precision=bf16,(", "E100", 16),          # not a value of the language at all
])
def test_bad_value_is_refused_naming_the_argument(arg, code_, column, capsys):
    code = main(["sweep", VIT, "-t", "p4d", "--over", arg, "--estimate"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"--over {arg}:1:{column}: error[{code_}]" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("flag,first,second", [("--over", "batch.micro=1,2", "micro=3,4"),
                                                ("--over", "precision=bf16", "precision=fp32"),
                                                ("--set", "micro=2", "batch.micro=4")])
def test_a_key_given_twice_is_refused_at_the_second(flag, first, second, capsys):
    """The second would silently replace the first's values (a lost axis of the sweep)."""
    verb = ["sweep", VIT, "-t", "p4d"] if flag == "--over" else ["plan", VIT, "-t", "p4d"]
    code = main([*verb, flag, first, flag, second, *(["--estimate"] if flag == "--over" else [])])
    err = capsys.readouterr().err
    assert code == 1 and f"{flag} {second}:1:1: error[E231]" in err and "given twice" in err, err


def test_a_point_the_rules_refuse_is_its_row(capsys):
    code = main(["sweep", VIT, "-t", "p4d", "--over", "devices=3,4", "--over", "parallel=tensor(tp = 2)",
                 "--estimate", "--csv"])
    rows = _csv(capsys.readouterr().out)
    assert code == 0
    assert rows[0]["over.devices"] == "3" and rows[0]["bound_by"] == "refused E402"
    assert rows[1]["over.devices"] == "4" and rows[1]["bound_by"] in ("compute", "memory bandwidth", "communication")


def test_pareto_front_is_the_undominated_rows(capsys):
    main(["sweep", VIT, "--over", "instance=p4d.24xlarge,p5.48xlarge", "--over", "batch.micro=16,32,64",
          "-t", "p4d", "--estimate", "--json"])
    pts = json.loads(capsys.readouterr().out)["result"]["points"]
    ranked = [p for p in pts if p.get("job_hours") is not None and p.get("job_usd") is not None and p["fits"]]
    assert len(ranked) == 6
    for p in ranked:
        dominated = any(q is not p and q["job_hours"] <= p["job_hours"] and q["job_usd"] <= p["job_usd"]
                        and (q["job_hours"] < p["job_hours"] or q["job_usd"] < p["job_usd"]) for q in ranked)
        assert p["pareto"] == (not dominated), p


def test_plot_draws_the_front(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "front.png"
    code = main(["sweep", VIT, "-t", "p4d", "--over", "instance=p4d.24xlarge,p5.48xlarge", "--over",
                 "batch.micro=16,64", "--estimate", "--csv", "--plot", str(out)])
    capsys.readouterr()
    assert code == 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_equal_work_in_estimate_job_columns(tmp_path):
    """A target with a larger global batch does fewer optimizer steps for the same samples."""
    from accelctl.api import estimate_targets, load

    f = tmp_path / "w.wl"
    f.write_text(Path(TINY).read_text().replace("task pretrain { objective = classification }",
                                                "task pretrain { objective = classification  train_steps = 1000 }")
                 .replace("  target cpu {", "  target one {\n    device = cpu\n    devices = 1\n  }\n  target cpu {"))
    (spec,) = load(f)
    one, two = estimate_targets(spec, [spec.target("one"), spec.target("cpu")])
    assert one.work_samples == two.work_samples == 1000 * 4   # steps of the first target (global batch 4)
    assert one.projected_hours == pytest.approx(4000 / one.throughput / 3600)
    assert two.projected_hours == pytest.approx(4000 / two.throughput / 3600)


@pytest.mark.slow
def test_sweep_run_runs_cpu_points_for_real_with_repeats(tmp_path, capsys):
    """--run: each point for real (2 micro-batches x measure { repeat = 2 } = 4 runs, 2 series)."""
    from accelctl.run.store import list_runs

    wl = tmp_path / "tiny.wl"
    wl.write_text(Path(TINY).read_text().replace("devices  = 2", "devices  = 1")
                  .replace("measure { warmup = 1 step  steps = 6 steps }",
                           "measure { warmup = 1 step  steps = 2 steps  repeat = 2 }"))
    code = main(["sweep", str(wl), "--over", "batch.micro=2,3", "--run", "--runs-dir", str(tmp_path / "runs"),
                 "--csv"])
    capsys.readouterr()
    assert code == 0
    runs = list_runs(tmp_path / "runs")
    assert len(runs) == 4 and {r.status for r in runs} == {"ok"}
    micro = sorted(json.loads(r.path.joinpath("spec.json").read_text())["targets"][0]["batch"]["micro"] for r in runs)
    assert micro == [2, 2, 3, 3]
    assert len({json.loads(r.path.joinpath("series.json").read_text())["id"] for r in runs}) == 2


def test_sweep_run_says_not_run_for_an_accelerator_target(capsys):
    code = main(["sweep", VIT, "-t", "p4d", "--over", "batch.micro=8", "--run"])
    err = capsys.readouterr().err
    assert code == 1
    assert "NOT RUN: needs a100_40gb devices" in err

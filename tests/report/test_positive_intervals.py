"""Intervals of positive quantities never go below zero (issue 26 #4).

A run of three measured steps, one of them a stall (20 ms, 21 ms, 500 ms: a shared machine),
gave its mean step time the Student-t interval ``mean ± t·s/√n`` = 180 ms ± 690 ms, a lower
bound of about -510 ms, in the run's summary, the `report` tables (rich, md, CSV, JSON), the
plot's error bars and every export (TensorBoard ``summary/step_time_ci_low_s``, MLflow, W&B).
The interval is now on the log scale (``accelctl.analysis.ci.positive_mean_ci``): above
zero, the mean inside it.  The exports are read back with the trackers' own clients.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics

import pytest
from make_fixtures import T0, TRAIN_SPEC, write_run

from accelctl.analysis.ci import mean_ci, positive_mean_ci, repeat_summary, t_quantile
from accelctl.analysis.stats import steady_state
from accelctl.cli import main
from accelctl.contract.events import PhaseChanged, RunFinished, RunStarted, StepMetrics
from accelctl.report.entry import entry_from_run
from accelctl.run.store import load_run

STALLED = [0.020, 0.021, 0.500]
RUN_ID = "20260103-000000-fixture_train-small-0b0b"


def stalled_events(run_id: str = RUN_ID) -> list:
    ev = [RunStarted(run_id=run_id, workload="fixture_train", target="small", backend="cpu", rank=0, world_size=1,
                     time_unix_s=T0),
          PhaseChanged(phase="warmup", rank=0, time_unix_s=T0 + 1),
          StepMetrics(step=1, phase="warmup", step_time_s=0.3, rank=0, loss=7.0, samples=8, time_unix_s=T0 + 1),
          PhaseChanged(phase="measure", rank=0, repeat=0, time_unix_s=T0 + 2)]
    ev += [StepMetrics(step=i, phase="measure", step_time_s=t, rank=0, repeat=0, loss=6.0, samples=8,
                       samples_per_s=8 / t, time_unix_s=T0 + 2 + i) for i, t in enumerate(STALLED, start=2)]
    return ev + [RunFinished(rank=0, steps=4, wall_s=5.0, time_unix_s=T0 + 10)]


@pytest.fixture
def store(tmp_path):
    spec = dict(TRAIN_SPEC, measure={"warmup": 1, "steps": 3, "repeat": 1})
    write_run(RUN_ID, spec, "small", stalled_events(), root=tmp_path)
    return tmp_path


def test_the_symmetric_interval_went_below_zero_the_log_scale_one_does_not():
    old = mean_ci(STALLED)  # what every run summary used
    assert old.low < -0.4
    new = positive_mean_ci(STALLED)
    m = statistics.fmean(STALLED)
    k = t_quantile(0.975, 2) * statistics.stdev(STALLED) / (math.sqrt(3) * m)
    assert new.mean == pytest.approx(m) and new.n == 3
    assert (new.low, new.high) == (pytest.approx(m * math.exp(-k)), pytest.approx(m * math.exp(k)))
    assert 0 < new.low < m < new.high
    # the same to first order where the spread is small: 100 ms ± 1 %
    tight = [0.099, 0.100, 0.101]
    assert positive_mean_ci(tight).low == pytest.approx(mean_ci(tight).low, rel=1e-3)
    # repeats (one mean each) too, with and without MLPerf trimming
    for xs in ([0.02, 0.03, 0.6], [0.02, 0.021, 0.022, 0.6, 0.9, 0.019]):
        assert repeat_summary(xs).ci.low > 0
    assert positive_mean_ci([0.1]) is None and positive_mean_ci([0.1, 0.0]) is None


def test_run_summary_and_report_tables(store, capsys):
    st = steady_state(stalled_events())
    assert 0 < st.step_time_ci.low < st.step_time.mean < st.step_time_ci.high
    summary = json.loads((store / RUN_ID / "summary.json").read_text())
    assert summary["stats"]["step_time_ci"]["low"] > 0
    e = entry_from_run(load_run(RUN_ID, store))
    assert 0 < e.step_time_ci.low < e.step_time_s

    capsys.readouterr()
    assert main(["report", RUN_ID, "--runs-dir", str(store), "-f", "csv"]) == 0
    (row,) = [r for r in csv.DictReader(io.StringIO(capsys.readouterr().out)) if r["source"] == RUN_ID]
    assert 0 < float(row["step_time_ci_low_s"]) < float(row["step_time_s"]) < float(row["step_time_ci_high_s"])
    assert main(["report", RUN_ID, "--runs-dir", str(store), "-f", "json"]) == 0
    (table,) = json.loads(capsys.readouterr().out)["result"]["tables"]
    (mean, low, high), = [r["step_time"] for r in table["rows"]]
    assert 0 < low < mean < high
    assert main(["report", RUN_ID, "--runs-dir", str(store), "-f", "md"]) == 0
    md = capsys.readouterr().out
    below = (mean - low) / mean * 100
    assert f"180.3 ms -{below:.1f}/+" in md and below < 100  # below the mean by less than the mean
    assert "never below zero" in md


def test_exports_read_back_above_zero(store, tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert main(["report", RUN_ID, "--runs-dir", str(store), "-f", "md", "--tensorboard", str(tmp_path / "tb")]) == 0
    acc = EventAccumulator(str(tmp_path / "tb" / RUN_ID))
    acc.Reload()
    (low,) = acc.Scalars("summary/step_time_ci_low_s")
    (high,) = acc.Scalars("summary/step_time_ci_high_s")
    assert 0 < low.value < statistics.fmean(STALLED) < high.value


@pytest.mark.slow
def test_mlflow_and_wandb_read_back_above_zero(store, tmp_path, capsys):
    from mlflow.tracking import MlflowClient
    from wandb_offline import item_key, read_records

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["report", RUN_ID, "--runs-dir", str(store), "-f", "md", "--mlflow", uri]) == 0
    client = MlflowClient(tracking_uri=uri)
    (found,) = client.search_runs([client.get_experiment_by_name("fixture_train").experiment_id])
    lows = {k: v for k, v in found.data.metrics.items() if "ci" in k and (k.endswith("low") or k.endswith("low_s"))}
    assert "summary/step_time_ci_low_s" in lows and all(v > 0 for v in lows.values()), lows

    assert main(["report", RUN_ID, "--runs-dir", str(store), "-f", "md", "--wandb", "accelctl-test",
                 "--wandb-dir", str(tmp_path)]) == 0
    (wfile,) = (tmp_path / "wandb").glob("offline-run-*/*.wandb")
    summary = {}
    for r in read_records(wfile):
        if r.WhichOneof("record_type") == "summary":
            summary.update({item_key(i): json.loads(i.value_json) for i in r.summary.update})
    lows = {k: v for k, v in summary.items() if "ci" in k and (k.endswith("low") or k.endswith("low_s"))}
    assert "summary/step_time_ci_low_s" in lows and all(v > 0 for v in lows.values()), lows

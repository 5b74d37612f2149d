"""What a tracker is given of a run, as plain data (``accelctl.run.tracking.fields``,
``accelctl.analysis.scalars``): one metric set per task kind with the phase its own figure,
typed params with every hyperparameter, a handful of summary figures."""

from __future__ import annotations

from accelctl.analysis.scalars import TrackerSteps, step_scalars
from accelctl.contract.events import StepMetrics
from accelctl.run.tracking import fields

SPEC = {"seed": 3, "optimizer": {"name": "adamw", "lr": 0.001, "weight_decay": 0.1, "grad_clip": 1.0},
        "targets": [{"name": "cpu", "optimizer": None, "parallel": {"strategy": "fsdp", "tp": 1, "pp": 1}},
                    {"name": "big", "optimizer": {"name": "sgd", "lr": 0.1}, "parallel": {"strategy": "ddp"}}]}
DETAILS = {"precision": "bf16", "micro_batch": 2, "global_batch": 8, "accumulation": 2, "task": "pretrain",
           "shape": {"layers": 2, "hidden": 64, "heads": 4}}


def _params(target: str) -> dict:
    return fields.run_params(run_id="r1", workload="w", target=target, backend="cpu", engine="local",
                             device="cpu", world_size=2, details=DETAILS, measure={"warmup": 1, "steps": 5},
                             spec=SPEC)


def test_params_are_typed_and_hold_every_hyperparameter_and_the_model_dimensions():
    p = _params("cpu")
    assert (p["optimizer"], p["lr"], p["weight_decay"], p["grad_clip"], p["seed"]) == ("adamw", 0.001, 0.1, 1.0, 3)
    assert (p["micro_batch"], p["global_batch"], p["accumulation"], p["precision"]) == (2, 8, 2, "bf16")
    assert (p["parallel.strategy"], p["model.hidden"], p["world_size"], p["run_id"]) == ("fsdp", 64, 2, "r1")
    assert (p["measure.warmup"], p["measure.steps"]) == (1, 5)
    # a target's own optimizer wins over the workload's
    assert (_params("big")["optimizer"], _params("big")["lr"]) == ("sgd", 0.1)
    # MLflow keeps text: numbers as written, never JSON-quoted strings
    text = fields.mlflow_params(p)
    assert (text["world_size"], text["lr"], text["optimizer"]) == ("2", "0.001", "adamw")


def test_one_metric_set_per_task_kind_with_the_phase_as_a_figure():
    assert [fields.metric_prefix(t) for t in ("pretrain", "finetune", "infer", "generate")] == \
        ["train", "train", "eval", "gen"]
    warm = StepMetrics(step=1, phase="warmup", step_time_s=0.2, ttft_s=0.05, tokens_per_s=100.0)
    measured = StepMetrics(step=2, phase="measure", step_time_s=0.1, ttft_s=0.04, tokens_per_s=120.0)
    assert dict(step_scalars(warm, 0.2, "gen")) == {"gen/step_time_s": 0.2, "gen/phase": 0.0, "gen/tokens_per_s": 100.0,
                                                    "gen/ttft_s": 0.05}
    assert dict(step_scalars(measured, 0.1, "gen"))["gen/phase"] == 1.0
    row = fields.step_row("gen", 2, 1000.5, step_scalars(measured, 0.1, "gen"))
    assert row["gen/global_step"] == 2 and row["_timestamp"] == 1000.5
    # accelctl's step numbers stand; a round numbered from 0 again goes on counting
    number = TrackerSteps()
    assert [number(StepMetrics(step=s, phase="measure", step_time_s=0.1)) for s in (1, 2, 3, 0, 1)] == [1, 2, 3, 4, 5]


def test_a_handful_of_summary_figures_the_one_throughput_first():
    summary = {"task": "pretrain", "stats": {
        "step_time": {"median": 0.1, "p90": 0.2, "mean": 0.12, "count": 5, "p99": 0.3, "stdev": 0.01},
        "throughput": {"samples_per_s": {"median": 80.0, "mean": 90.0, "aggregate": 85.0},
                       "tokens_per_s": {"median": 10240.0, "mean": 11000.0, "aggregate": 10500.0}},
        "mfu": {"median": 0.3, "mean": 0.31}, "peak_mem_bytes": 1024, "loss": {"last": 2.5, "first": 3.0}},
        "timings": {"wall_s": 12.0}}
    headline = fields.headline_metrics(summary)
    assert list(headline) == ["throughput", "step_time_median_s", "step_time_p90_s", "step_time_mean_s",
                              "measured_steps", "mfu_median", "peak_mem_bytes", "loss_last"]
    assert headline["throughput"] == 80.0 and fields.throughput_unit(summary) == "sequences/s"

"""torchao float8 training (emulated on this CPU, as ``accelctl run --rehearse`` runs an fp8
target) for every family built of linears: the layers the worker converts are exactly those
the plan lists (``accelctl.models.fp8_layers``), and a few bf16-autocast training steps with
them give finite losses close to the same model's without FP8."""

from __future__ import annotations

import copy
import math
import re

import pytest
import torch

from accelctl.contract.job import DeviceJob, WorkerJob
from accelctl.models import fp8_layers
from accelctl.models.catalog import FAMILIES
from accelctl.workload import types as T

pytest.importorskip("torchao")

from accelctl.worker import data, float8, models  # noqa: E402
from accelctl.worker.train_loop import forward_loss  # noqa: E402

OBJECTIVE = {"bert": "mlm", "t5": "seq2seq", "vit": "classification"}
#: the families an architecture names (the transformers family's shape is its module's facts)
TRAINED = [f for f, fam in FAMILIES.items() if "pretrain" in fam.tasks and not fam.from_module]
#: widths that divide by 16, so every linear but the heads goes FP8
WIDE = {"ffn": 128, "vocab": 256}


def job_for(family: str, shape: dict, recipe: str = "tensorwise", parallel: str = "none") -> WorkerJob:
    fmt = "e4m3" if recipe == "rowwise" else "hybrid"
    return WorkerJob(
        run_id="fp8", workload="fp8", target="cpu", backend="cpu", device=DeviceJob(),
        task=T.TaskSpec(kind="pretrain", objective=OBJECTIVE.get(family, "causal_lm")),
        model=T.ModelSpec(family=family, source="arch", stand_in=shape, weights="random"), architecture=shape,
        scale="stand_in", data=T.DatasetSpec(seq_len=16, target_len=8, image_size=32, classes=10),
        precision=T.PrecisionSpec(dtype="fp8", fp8=T.Fp8Recipe(library="torchao", recipe=recipe, format=fmt)),
        optimizer=T.OptimizerSpec(name="sgd", lr=0.05, momentum=0.9), measure=T.MeasureSpec(warmup=1, steps=2),
        batch=T.BatchSpec(micro=2), parallel=T.ParallelSpec(strategy=parallel), threads=1, events_dir="")


def expand(split: fp8_layers.Split) -> tuple[set[str], set[str]]:
    """The plan's module names (``*`` = 0..count-1) of its FP8 and kept layers."""
    def names(layers):
        return {re.sub(r"\*", str(i), x.name) if "*" in x.name else x.name for x in layers for i in range(x.count)}
    return names(split.fp8), names(x for x, _ in split.kept)


def shape_of(family: str, wide: bool) -> dict:
    shape = dict(FAMILIES[family].shape)
    if wide and family not in ("vit",):
        shape.update({k: v for k, v in WIDE.items() if k in shape or k == "vocab"})
        if family in ("bloom", "gpt2"):
            shape.pop("ffn", None)  # 4 x hidden
    return shape


@pytest.mark.parametrize("wide", [False, True], ids=["stand-in", "widths-of-16"])
@pytest.mark.parametrize("family", TRAINED)
def test_the_worker_converts_the_linears_the_plan_lists(family, wide):
    j = job_for(family, shape_of(family, wide))
    built = models.build(j, lambda *_: None)
    said = []
    try:
        float8.convert(built.model, j, on_host=True, log=lambda level, msg: said.append(msg))
    except RuntimeError as exc:  # nothing convertible: the plan refuses the same shape
        planned = fp8_layers.split(family, j.architecture, 16, 8)
        assert not planned.fp8 and "nothing would run in FP8" in str(exc)
        return
    converted = {n for n, m in built.model.named_modules() if type(m).__name__ == "Float8Linear"}
    linear = {n for n, m in built.model.named_modules() if isinstance(m, torch.nn.Linear)} - converted
    planned_fp8, planned_kept = expand(fp8_layers.split(family, j.architecture, 16, 8))
    assert converted == planned_fp8
    assert linear == planned_kept
    assert f"{len(converted)} linear layer(s) in FP8" in said[0]


def train(model, built, j, steps: int) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=j.optimizer.lr, momentum=j.optimizer.momentum)
    batches = iter(data.training_batches(j, built, 0, 1, lambda *_: None))
    out = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = forward_loss(model, built.kind, next(batches))
        loss.backward()
        opt.step()
        out.append(float(loss.detach()))
    return out


@pytest.mark.slow  # each: 3 steps of bf16 and of FP8, 3-14 s on the 2-core lab machine
@pytest.mark.parametrize("family,recipe", [*((f, "tensorwise") for f in TRAINED),
                                           *((f, "rowwise") for f in ("llama", "gpt2", "bert", "t5", "vit"))])
def test_every_family_trains_in_emulated_fp8_close_to_bf16(family, recipe):
    j = job_for(family, shape_of(family, wide=True), recipe)
    built = models.build(j, lambda *_: None)
    baseline = copy.deepcopy(built.model).train()
    fp8 = float8.convert(built.model, j, on_host=True, log=lambda *_: None).train()
    assert any(type(m).__name__ == "Float8Linear" for m in fp8.modules())
    got, want = train(fp8, built, j, 3), train(baseline, built, j, 3)
    assert all(math.isfinite(x) for x in got)
    # the same weights and batches: FP8's rounding moves the first loss by well under 5 %
    assert abs(got[0] - want[0]) < 0.05 * abs(want[0]), (got, want)

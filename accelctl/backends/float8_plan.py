"""What a torchao float8 plan says and refuses (``precision fp8 { library = torchao }`` on the
torchrun backend): the recipe, the linear layers that go FP8 and those kept in bf16
(``accelctl.models.fp8_layers``, for the shape this target runs), and FSDP2's FP8 all-gather."""

from __future__ import annotations

from accelctl.backends.base import refusal
from accelctl.errors import Diagnostic
from accelctl.models import fp8_layers
from accelctl.catalog import DEVICES
from accelctl.models.catalog import real_architecture
from accelctl.workload.types import TargetSpec, WorkloadSpec

RECIPES = {
    "tensorwise": "dynamic tensorwise scaling (one scale per tensor, cuBLAS FP8 GEMM)",
    "rowwise": "dynamic rowwise scaling (one power-of-2 scale per row, E4M3 throughout, CUTLASS rowwise GEMM)",
}


def run_shape(spec: WorkloadSpec, target: TargetSpec) -> tuple[dict, str]:
    """The architecture ``target`` runs: the real one where known, except on the host CPU."""
    m = spec.model
    if m.real_shape and not DEVICES[target.device].host:
        return real_architecture(m.family, m.real_shape), "real model"
    return dict(m.stand_in), "stand-in"


def split(spec: WorkloadSpec, target: TargetSpec) -> tuple[fp8_layers.Split, str]:
    shape, label = run_shape(spec, target)
    return fp8_layers.split(spec.model.family, shape, spec.dataset.seq_len, spec.dataset.target_len), label


def notes(spec: WorkloadSpec, target: TargetSpec) -> list[str]:
    r = target.precision.fp8
    s, label = split(spec, target)
    out = [f"fp8 through torchao: convert_to_float8_training, recipe {r.recipe}: {RECIPES[r.recipe]}, "
           f"format {r.format}, inside bf16 autocast; the {label}'s linears:"]
    out += [f"  {line}" for line in s.lines()]
    if target.parallel.strategy == "fsdp":
        out.append("  FSDP2: " + ("weights all-gathered in FP8 (enable_fsdp_float8_all_gather), their scales for "
                                  "every layer in one all-reduce after each optimizer step "
                                  "(precompute_float8_dynamic_scale_for_fsdp)" if r.recipe == "tensorwise" else
                                  "weights all-gathered in bf16 (torchao's FP8 all-gather is tensorwise only)"))
    return out


def unsupported(spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
    """torchao float8 where accelctl does not run it: under tensor or pipeline parallel, and on a
    model with no linear it would convert."""
    if target.precision.dtype != "fp8" or target.precision.fp8 is None or target.precision.fp8.library != "torchao":
        return []
    out = []
    if target.parallel.strategy in ("tensor", "pipeline") or target.parallel.tp > 1 or target.parallel.pp > 1:
        out.append(refusal(spec, target, "torchao float8 under tensor or pipeline parallel (Float8ColwiseParallel / "
                           "Float8RowwiseParallel plans) is not built; use parallel = fsdp or ddp", "parallel"))
    s, label = split(spec, target)
    if not s.fp8 and spec.model.family in fp8_layers.FAMILIES and spec.task.training:
        out.append(refusal(spec, target, f"torchao float8: no linear layer of the {label} goes FP8 (dims multiples of "
                           f"{fp8_layers.FP8_DIM}, output heads kept): "
                           + "; ".join(f"{x.label()}: {why}" for x, why in s.kept), "precision"))
    return out

"""te_fp8: Transformer Engine blocks, and FP8 on Hopper/Ada, for timm ViTs (seed 002).

torchrun with nccl, one process per GPU; the worker (``accelctl.worker.te_layers``) builds the
ViT with ``te.TransformerLayer`` blocks and, with precision fp8, runs the forward in the targeted
TE version's FP8 autocast (a ``DelayedScaling`` recipe from the workload) inside bf16 autocast.
All the worker takes from TE is in ``te_recipe.json`` (a generated file of the plan), which
``accelctl.backends.te_fp8.check`` checks against TE's source.  The autocast API per TE version
is data (``AUTOCAST_API``: ``te.autocast`` since 2.9, ``te.fp8_autocast`` deprecated).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from accelctl.backends import float8_plan
from accelctl.backends.base import Built, refusal
from accelctl.backends.te_fp8.versions import version_tuple
from accelctl.backends.torchrun import TorchrunBackend
from accelctl.contract import envnames
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import RUN_DIR, GeneratedFile, Plan
from accelctl.errors import Diagnostic
from accelctl.catalog import DEVICES
from accelctl.models import fp8_layers
from accelctl.models.catalog import FAMILIES
from accelctl.language.te_versions import AUTOCAST_API
from accelctl.workload.types import TargetSpec, WorkloadSpec
from accelctl.frozen import replace

if TYPE_CHECKING:  # plan --check's result type: planning (validate's verdict) needs none
    from accelctl.backends.findings import CheckResult

#: the Transformer Engine release a plan targets unless the target sets ``te_version``
TE_DEFAULT_VERSION = "2.20"

#: the workload's recipe words -> ``transformer_engine.common.recipe`` names
RECIPE_CLASS = "DelayedScaling"
FP8_FORMATS = {"hybrid": "HYBRID", "e4m3": "E4M3"}

#: ``te.TransformerLayer`` settings that make it a ViT encoder block: every patch sees every
#: patch (TE's default mask is causal), timm's tensors are (batch, tokens, hidden) (TE's
#: default layout is sbhd), and timm's LayerNorm eps.  Seed 002's TE_Block left TE's
#: defaults (causal, sequence-first), so its attention ran over the batch dimension.
VIT_LAYER_KWARGS: dict[str, object] = {
    "self_attn_mask_type": "no_mask",
    "attn_input_format": "bshd",
    "layernorm_epsilon": 1e-6,
}
#: the plan's note on why its block differs from seed 002's TE_Block (which passed only the
#: first five arguments), stated on every TE plan
VIT_LAYER_DEVIATION = (
    "deliberately not seed 002's TE_Block, which passed only hidden_size, ffn_hidden_size, num_attention_heads "
    "and the dropouts: with TE's defaults (self_attn_mask_type='causal', sequence-first 'sbhd' layout) its "
    "attention was causal and ran over the batch dimension of timm's (batch, tokens, hidden) tensors, and its "
    "LayerNorm eps 1e-05 was not timm's 1e-06; the step's FLOPs and shapes are the same, its numerics are a ViT's")

#: FP8 GEMM operand rule of TE (``pytorch/utils.py: assert_dim_for_fp8_exec``): the product
#: of all dimensions but the last divisible by 8, the last by 16; te_check reads it back.
FP8_DIMS = (8, 16)

#: ``accelctl doctor``: whether Transformer Engine's PyTorch layers import here
PROBES = {"transformer_engine": (
    "import json, transformer_engine.pytorch as te\nprint(json.dumps({'version': te.__version__}))"
)}

CONFIG_FILE = "te_recipe.json"
#: the worker's TE code, checked against TE's source by ``--check`` (read as text, never imported)
WORKER_TE_LAYERS = Path(__file__).resolve().parents[2] / "worker" / "te_layers.py"
#: where the worker finds the generated file
CONFIG_ENV = envnames.TE_CONFIG


def autocast_api(version: str) -> tuple[str, str]:
    """The FP8 autocast function of a TE version and its recipe keyword."""
    v = version_tuple(version)[:2]
    for first, function, keyword in AUTOCAST_API:
        if v >= first:
            return function, keyword
    raise ValueError(f"no FP8 autocast known for Transformer Engine {version}")


def te_version(target: TargetSpec) -> str:
    return target.options.te_version or TE_DEFAULT_VERSION


def te_config(spec: WorkloadSpec, target: TargetSpec) -> dict:
    """The content of ``te_recipe.json``: the layer, and the FP8 recipe and autocast."""
    version = te_version(target)
    layer = {"class": "TransformerLayer", "kwargs": dict(VIT_LAYER_KWARGS)}
    if spec.model.family in LINEAR_SWAP_FAMILIES:
        layer = {"class": "Linear", "kwargs": {}, "modules": linear_swap(spec, target)[0]}
    cfg: dict = {
        "transformer_engine": version,
        "layer": layer,
        "outer_autocast": "bf16" if target.precision.dtype == "fp8" else target.precision.dtype,
        "fp8": target.precision.dtype == "fp8",
        "autocast": None,
        "recipe": None,
    }
    if cfg["fp8"]:
        r = target.precision.fp8
        function, keyword = autocast_api(version)
        cfg["autocast"] = {"function": function, "recipe_keyword": keyword, "kwargs": {"enabled": True}}
        cfg["recipe"] = {"class": RECIPE_CLASS, "kwargs": {
            "fp8_format": FP8_FORMATS[r.format], "amax_history_len": r.amax_history,
            "amax_compute_algo": r.amax_algo, "margin": r.margin}}
    return cfg


#: llama-class families: their attention and MLP projections become ``te.Linear`` (attention,
#: rotary embeddings, RMSNorm and the LM head stay transformers')
LINEAR_SWAP_FAMILIES = ("llama", "mistral", "qwen2", "gemma")


def linear_swap(spec: WorkloadSpec, target: TargetSpec) -> tuple[list[str], list[str]]:
    """The module patterns a llama-class plan swaps for ``te.Linear`` and the linears it keeps
    (with the reason): ``fp8_layers``' rule, the one TE's FP8 GEMM needs too."""
    shape, label = float8_plan.run_shape(spec, target)
    s = fp8_layers.split(spec.model.family, shape, spec.dataset.seq_len, spec.dataset.target_len)
    return [x.name for x in s.fp8], [f"{x.label()}: {why}" for x, why in s.kept]


def vit_shapes(spec: WorkloadSpec, target: TargetSpec) -> list[tuple[str, dict, bool]]:
    """The ViT shapes the worker may build: (label, shape, certain)."""
    m = spec.model
    weights = target.options.weights or m.weights
    real = m.real_shape if {"hidden", "image_size", "patch"} <= set(m.real_shape) else {}
    if m.source == "arch" or weights == "stand_in" or (weights == "auto" and not real):
        return [("model", m.stand_in, m.source == "arch" or weights == "stand_in")]
    if weights == "real":
        return [("real model", real, True)] if real else []
    return [("stand-in", m.stand_in, False), ("real model", real, False)]


def fp8_shape_problems(shape: dict, micro: int) -> list[str]:
    """Where a ViT shape breaks TE's FP8 GEMM rule (``FP8_DIMS``)."""
    rows, cols = FP8_DIMS
    family = FAMILIES["vit"].shape
    s = {**family, **shape}
    hidden, ffn = int(s["hidden"]), int(s["hidden"] * s["mlp_ratio"])
    tokens = (int(s["image_size"]) // int(s["patch"])) ** 2 + 1  # patches + class token
    out = []
    if (micro * tokens) % rows:
        out.append(f"micro-batch x tokens = {micro} x {tokens} = {micro * tokens} is not a multiple of {rows}")
    for name, n in (("hidden", hidden), ("ffn (hidden x mlp_ratio)", ffn)):
        if n % cols:
            out.append(f"{name} = {n} is not a multiple of {cols}")
    return out


class TeFp8Backend(TorchrunBackend):
    name = "te_fp8"
    precisions = ("fp32", "bf16", "fp16", "fp8")
    fp8_library = "transformer_engine"
    strategies = ("none", "data")
    tasks = ("pretrain", "finetune")
    summary = "torchrun + nccl, timm ViT blocks swapped for te.TransformerLayer, FP8 autocast (Transformer Engine)"
    compile_refusal = ("accelctl has not run torch.compile over Transformer Engine layers and fp8_autocast "
                       "(no Hopper GPU here to prove it): remove compile for this target")
    probes = PROBES

    def selects(self, spec: WorkloadSpec, target: TargetSpec) -> bool:
        wants_te = is_te_fp8(target) or bool(target.options.te_layers)
        return wants_te and super().selects(spec, target)

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        if spec.model.family not in ("vit", *LINEAR_SWAP_FAMILIES):
            out.append(refusal(spec, target, f"backend te_fp8 swaps the blocks of timm ViTs and the projections of "
                               f"{', '.join(LINEAR_SWAP_FAMILIES)}; family {spec.model.family} has no TE block swap "
                               "(precision fp8 { library = torchao } runs any family built of linears)", "model"))
        elif spec.model.family in LINEAR_SWAP_FAMILIES and not linear_swap(spec, target)[0]:
            out.append(refusal(spec, target, "te_fp8: no projection of this model has dims that are multiples of "
                               f"{fp8_layers.FP8_DIM}: " + "; ".join(linear_swap(spec, target)[1]), "model"))
        dev = DEVICES[target.device]
        if target.precision.dtype == "fp8":
            if not dev.fp8:
                out.append(refusal(spec, target, f"fp8 needs a Hopper/Ada GPU; {target.device} has no FP8 tensor "
                                   "cores", "precision"))
            if spec.model.family == "vit":
                for label, shape, certain in vit_shapes(spec, target):
                    problems = fp8_shape_problems(shape, target.batch.micro)
                    if problems and certain:
                        out.append(refusal(
                            spec, target, f"TE runs FP8 GEMMs only on operands whose leading dims multiply to a "
                            f"multiple of {FP8_DIMS[0]} and whose last dim is a multiple of {FP8_DIMS[1]}: {label}: "
                            + "; ".join(problems), "micro_batch", "batch.micro", "model"))
        return out

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        built = super().build(spec, target, job)  # torchrun --nproc_per_node=<GPUs>, nccl
        cfg = te_config(spec, target)
        launches = [_with_env(launch, {CONFIG_ENV: f"{RUN_DIR}/{CONFIG_FILE}"}) for launch in built.launches]
        files = [*built.files, GeneratedFile(CONFIG_FILE, json.dumps(cfg, indent=2, sort_keys=True) + "\n",
                                             role="Transformer Engine layer, FP8 recipe and autocast API")]
        layer = ", ".join(f"{k}={v!r}" for k, v in cfg["layer"]["kwargs"].items())
        if cfg["layer"]["class"] == "Linear":
            swapped, kept = linear_swap(spec, target)
            notes = [*built.notes,
                     f"Transformer Engine {cfg['transformer_engine']}: te.Linear(in_features, out_features, bias, "
                     f"params_dtype) in place of {', '.join(swapped)} (weights copied); attention (rotary, SDPA), "
                     f"RMSNorm, embeddings and lm_head stay transformers'; kept: {'; '.join(kept) or 'none'}"]
        else:
            notes = [*built.notes,
                     f"Transformer Engine {cfg['transformer_engine']}: timm blocks -> te.TransformerLayer(hidden_size="
                     f"dim, ffn_hidden_size=dim*mlp_ratio, num_attention_heads=heads, hidden_dropout, "
                     f"attention_dropout, {layer}) via VisionTransformer(block_fn=...)", VIT_LAYER_DEVIATION]
        warnings = list(built.warnings)
        if cfg["fp8"]:
            a, r = cfg["autocast"], cfg["recipe"]
            kw = ", ".join(f"{k}={v!r}" for k, v in r["kwargs"].items())
            notes.append(f"forward in torch.autocast(bf16) > te.{a['function']}(enabled=True, "
                         f"{a['recipe_keyword']}={r['class']}({kw}))"
                         + ("" if a["function"] == "autocast" else "  (API of TE < 2.9)"))
            for label, shape, certain in vit_shapes(spec, target):
                problems = fp8_shape_problems(shape, target.batch.micro)
                if problems and not certain:
                    warnings.append(f"if the {label} runs, TE will refuse its FP8 GEMMs: " + "; ".join(problems))
            notes.append("FP8 trades precision and range for speed: convergence may need recipe tuning "
                         "(seed 002's caveat)")
        else:
            notes.append(f"te_layers without fp8: TE blocks under {cfg['outer_autocast']} autocast, no FP8 autocast")
        return Built(launches, files, notes, warnings)


    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """torchrun's parser, then ``te_recipe.json`` and the worker's TE code against TE's own source."""
        from accelctl.backends.findings import CheckResult, not_run
        from accelctl.backends.te_fp8 import check as te_check

        out = super().check(plan, spec)
        te = te_check.TeSource.locate()
        if te is None:
            return [*out, not_run("transformer_engine", "pip install --no-deps transformer-engine==2.20.2")]
        cfg = json.loads(next(f.content for f in plan.files if f.path == CONFIG_FILE))
        findings = te_check.check_config(cfg, te) + te_check.check_worker_source(WORKER_TE_LAYERS, te)
        return [*out, CheckResult(f"transformer_engine {te.version} source", not findings, [str(f) for f in findings])]


def is_te_fp8(target: TargetSpec) -> bool:
    """fp8 through Transformer Engine (not torchao's float8, which the torchrun backend runs)."""
    recipe = target.precision.fp8
    return target.precision.dtype == "fp8" and (recipe is None or recipe.library == "transformer_engine")


def _with_env(launch, extra: dict[str, str]):

    return replace(launch, env={**launch.env, **extra})

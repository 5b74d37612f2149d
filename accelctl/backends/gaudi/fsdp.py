"""``parallel = fsdp`` on Gaudi: optimum-habana's FSDP path, GaudiTrainer through accelerate.

optimum-habana shards with FSDP only through its Trainer, so a Gaudi FSDP target runs an example
training script (``script = example``) in eager mode with ``torch.compile``'s ``hpu_backend``,
as its language-modeling README's Llama-2-70B command does (``lazy_mode = on`` is refused).
``fsdp_config.json`` is that README's file with the target's sharding strategy, offload and the
family's Gaudi decoder layer to wrap; ``accelctl.backends.gaudi.check`` runs it through the
installed ``GaudiTrainingArguments``.  ``script = worker`` with ``fsdp`` is refused on Gaudi.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from accelctl.contract.plan import RUN_DIR, GeneratedFile
from accelctl.workload.types import TargetSpec, WorkloadSpec

FSDP_CONFIG_FILE = "fsdp_config.json"
#: accelerate's FSDP_SHARDING_STRATEGY order (1-based): FULL_SHARD, SHARD_GRAD_OP
FULL_SHARD, SHARD_GRAD_OP = 1, 2
#: the block FSDP wraps, per family: the class adapt_transformers_to_gaudi installs where it has
#: one (optimum/habana/transformers/models/*: Gaudi<Name>), else transformers' own
WRAPPED_BLOCK = {
    "llama": "GaudiLlamaDecoderLayer", "mistral": "GaudiMistralDecoderLayer", "mixtral": "GaudiMixtralDecoderLayer",
    "qwen2": "GaudiQwen2DecoderLayer", "gemma": "GaudiGemmaDecoderLayer", "falcon": "GaudiFalconDecoderLayer",
    "gpt_neox": "GaudiGPTNeoXLayer", "gpt2": "GPT2Block", "bert": "BertLayer", "t5": "T5Block", "bloom": "BloomBlock",
}


def fsdp_limits(spec: WorkloadSpec, target: TargetSpec, no: Callable[..., None], example: bool) -> None:
    """Why a Gaudi FSDP target cannot run, each ``no(reason, *settings)``; ``example``: the
    target runs an example script (``script = example``)."""
    p = target.parallel
    if not example:
        no("FSDP on Gaudi is optimum-habana's GaudiTrainer (accelerate's FSDP) in an example training script: "
           "set script = example; accelctl's worker shards with FSDP2 on cpu and CUDA only", "parallel", "script")
    if p.tp > 1:
        no("fsdp(tp = N): optimum-habana's training takes no tensor-parallel degree; use fsdp without tp",
           "parallel")
    if target.options.lazy_mode is True:
        no("optimum-habana runs FSDP in eager mode with torch.compile (its README: PT_HPU_LAZY_MODE=0, "
           "--use_lazy_mode False, --torch_compile_backend hpu_backend); remove lazy_mode = on", "lazy_mode")
    if spec.model.family not in WRAPPED_BLOCK:
        no(f"no FSDP wrapping block is known for the {spec.model.family} family "
           f"(families: {', '.join(WRAPPED_BLOCK)})", "model")


#: why optimum-habana trains with no tensor or pipeline split
NO_TRAINING_SPLIT = ("optimum-habana's training (GaudiTrainingArguments, its example scripts) takes no tensor- or "
                     "pipeline-parallel degree: shard a model with parallel = fsdp (script = example: GaudiTrainer's "
                     "FSDP) or zero(stage = 3) (DeepSpeed)")


def split_limits(spec: WorkloadSpec, target: TargetSpec, no: Callable[..., None], example: bool) -> None:
    """``tensor`` / ``pipeline`` on Gaudi: generation only, through run_generation.py's own tensor
    parallel (``--parallel_strategy tp``: optimum.habana.distributed's TensorParallelStrategy,
    which its utils.py loads for llama checkpoints only)."""
    p = target.parallel
    if spec.task.training:
        no(NO_TRAINING_SPLIT, "parallel")
        return
    if p.strategy == "pipeline":
        no("optimum-habana has no pipeline-parallel generation: run_generation.py splits a model with its tensor "
           "parallel (tensor(tp = N), script = example) or DeepSpeed-inference (deepspeed_inference(tp = N))",
           "parallel")
        return
    if spec.task.kind != "generate" or not example:
        no("tensor parallel on Gaudi is run_generation.py --parallel_strategy tp (generate, script = example); "
           "accelctl's worker splits a model for generation with deepspeed_inference(tp = N)", "parallel", "script")
    if spec.model.family != "llama":
        no(f"run_generation.py's tensor-parallel path loads llama checkpoints only (setup_distributed_model_tp: "
           f'architecture = "llama"), not {spec.model.family}; use deepspeed_inference(tp = N)', "model")


def fsdp_config(spec: WorkloadSpec, target: TargetSpec) -> dict:
    """``fsdp_config.json``: the README's file, with this target's sharding, offload and block."""
    p = target.parallel
    return {
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_backward_prefetch": "BACKWARD_PRE",
        "fsdp_forward_prefetch": False,
        "fsdp_offload_params": p.offload != "none",
        "fsdp_sharding_strategy": FULL_SHARD if p.reshard_after_forward else SHARD_GRAD_OP,
        "fsdp_state_dict_type": "FULL_STATE_DICT",
        "fsdp_sync_module_states": True,
        "fsdp_use_orig_params": True,
        "transformer_layer_cls_to_wrap": WRAPPED_BLOCK.get(spec.model.family, ""),
        "fsdp_activation_checkpointing": target.gradient_checkpointing,
    }


def fsdp_args(target: TargetSpec) -> list[str]:
    """The training script's FSDP flags (after the README's command).  The sharding strategy
    goes in ``--fsdp`` (GaudiTrainingArguments sets accelerate's FSDP_SHARDING_STRATEGY from
    it; the config file's ``fsdp_sharding_strategy`` is not read there); gradient
    checkpointing as the config's ``activation_checkpointing`` (its warning: ``--gradient_
    checkpointing`` with full_shard adds an all-gather in backward)."""
    p = target.parallel
    options = ["full_shard" if p.reshard_after_forward else "shard_grad_op", "auto_wrap"]
    if p.offload != "none":
        options.append("offload")
    return ["--fsdp", " ".join(options), "--fsdp_config", f"{RUN_DIR}/{FSDP_CONFIG_FILE}",
            "--torch_compile_backend", "hpu_backend", "--torch_compile"]


def fsdp_file(spec: WorkloadSpec, target: TargetSpec) -> GeneratedFile:
    return GeneratedFile(FSDP_CONFIG_FILE, json.dumps(fsdp_config(spec, target), indent=2, sort_keys=True) + "\n",
                         role="fsdp_config.json for --fsdp_config (GaudiTrainingArguments -> accelerate's FSDP)")


def fsdp_notes(spec: WorkloadSpec, target: TargetSpec) -> list[str]:
    p, dp = target.parallel, target.world_size
    how = ("FULL_SHARD: each block's parameters all-gathered for its forward and again for its backward"
           if p.reshard_after_forward else "SHARD_GRAD_OP: parameters kept gathered from forward to backward")
    return [f"FSDP through GaudiTrainer (accelerate): {how}; parameters, gradients and optimizer state sharded over "
            f"the {dp} data-parallel ranks (1/{dp} each), one {WRAPPED_BLOCK.get(spec.model.family)} per FSDP unit"
            + ("; parameters offloaded to the host (accelerate's offload_params)" if p.offload != "none" else ""),
            "eager mode with torch.compile (hpu_backend), as optimum-habana's FSDP command runs it: "
            "PT_HPU_LAZY_MODE=0, --use_lazy_mode False"]

"""xla_neuron through optimum-neuron: tensor-parallel training and ``generate`` on trn1/inf2.

accelctl's worker trains data parallel (``backend.py``); splitting a model over NeuronCores is
neuronx-distributed's, reached through optimum-neuron's programs (``optimum_table``):
training (``zero(stage = 1, tp, pp)``, ``tensor``, ``pipeline``) runs ``torchrun finetune_llama.py``
with its tp / pp / ``--zero_1`` flags; generate (``tensor(tp = N)`` or none) runs ``optimum-cli
export neuron`` (compiled in the checkpoint's dtype), then ``generation.py`` on the export.
``{optimum_neuron}`` is an optimum-neuron checkout (``$OPTIMUM_NEURON_DIR``): the wheel has no
``examples/``.  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import math

from accelctl.backends.base import option
from accelctl.backends.xla_neuron.optimum_table import VERSION, stored
from accelctl.contract.job import WorkerJob
from accelctl.contract.placeholders import OPTIMUM_NEURON, placeholder_in
from accelctl.contract.plan import RUN_DIR, Launch
from accelctl.workload.types import TargetSpec, WorkloadSpec

#: the strategies that split a model: optimum-neuron's (the worker's are none and data)
SPLITS = ("zero", "tensor", "pipeline")
EXPORT_DIR = f"{RUN_DIR}/neuron_model"
TRAIN_EXAMPLE = "examples/training/llama/finetune_llama.py"
GENERATE_EXAMPLE = "examples/inference/text-generation/generation.py"
#: finetune_llama.sh's environment (compiler flags, fused softmax, async runtime, host arenas)
TRAIN_ENV = {"NEURON_CC_FLAGS": "--model-type transformer --retry_failed_compilation", "NEURON_FUSE_SOFTMAX": "1",
             "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3", "MALLOC_ARENA_MAX": "64"}
#: the exported sequence length is a multiple of this (prompt + new tokens, rounded up)
SEQUENCE_QUANTUM = 128
#: prompt tokens the export leaves room for when the dataset does not say
PROMPT_ROOM = 16


def through_optimum(spec: WorkloadSpec, target: TargetSpec) -> bool:
    """Whether this Neuron target runs optimum-neuron's programs (not accelctl's worker)."""
    return spec.task.kind == "generate" or target.parallel.strategy in SPLITS


def sequence_length(spec: WorkloadSpec) -> int:
    """The export's ``--sequence_length``: prompt room + new tokens, rounded up."""
    need = (spec.dataset.prompt_tokens or PROMPT_ROOM) + spec.task.max_new_tokens
    return SEQUENCE_QUANTUM * math.ceil(need / SEQUENCE_QUANTUM)


def limits(spec: WorkloadSpec, target: TargetSpec) -> list[tuple[str, tuple[str, ...]]]:
    """(reason, settings) of each thing optimum-neuron does not run for this target."""
    table, family, p, t = stored(), spec.model.family, target.parallel, spec.task
    out: list[tuple[str, tuple[str, ...]]] = []
    # a model read from its transformers class is named by its model_type
    model_type = spec.model.real_shape.get("model_type", "")
    name = f"{model_type} (read from its transformers class)" if model_type else family

    def unbuilt(models) -> str:
        return ("; accelctl plans optimum-neuron only for the families it has formulas for"
                if model_type in models else "")

    def no(reason: str, *settings: str) -> None:
        out.append((reason, settings))

    if spec.model.source not in ("hf", "local"):
        no("optimum-neuron loads a checkpoint: the model must be hf(\"...\") or local(\"...\")", "model")
    if target.device not in table["instance_types"]:
        no(f"optimum-neuron {VERSION} compiles for {', '.join(table['instance_types'])}, not {target.device}",
           "device", "instance")
    if t.kind == "generate":
        models = table["inference"]["text-generation"]
        if family not in models:
            no(f"optimum-neuron {VERSION} has no Neuron text-generation model for {name} (it exports "
               f"{', '.join(models)}){unbuilt(models)}", "model")
        if p.strategy not in ("none", "tensor"):
            no("generate on Neuron splits the model with optimum-neuron's export: parallel = tensor(tp = N)",
               "parallel")
        if target.nodes > 1 or target.world_size != p.tp:
            no(f"the exported model runs in one process over its tp NeuronCores of one instance: nodes = 1, "
               f"devices = tp ({p.tp}), not {target.nodes} x {target.devices}", "devices", "nodes", "parallel")
        if spec.dataset.kind != "synthetic":
            no("generation.py takes its prompt on the command line (--prompts), not from a dataset", "dataset")
        if "|" in t.prompt:
            no("generation.py splits --prompts at '|': write the prompt without it", "task.prompt", "task")
    elif t.training:
        models = table["training"]["text-generation"]
        if family not in models:
            no(f"optimum-neuron {VERSION} trains {', '.join(models)} with neuronx-distributed's tensor parallel, "
               f"not {name}{unbuilt(models)}", "model")
        if t.objective not in ("", "causal_lm"):
            no("optimum-neuron's finetune_llama.py trains a causal LM", "task.objective", "task")
        heads = int(spec.model.real_shape.get("heads", 0) or 0)
        if p.strategy == "zero" and p.tp > 1 and heads and heads % p.tp:  # tensor(): E416 says it at validate
            no(f"tp = {p.tp} does not divide the model's {heads} heads (neuronx-distributed's training splits "
               "query heads evenly)", "parallel")
        if p.strategy == "zero" and p.zero_stage != 1:
            no(f"optimum-neuron's ZeRO is stage 1 (NeuronTrainingArguments zero_1), not {p.zero_stage}", "parallel")
        if p.offload_optimizer != "none" or p.offload_param != "none":
            no("optimum-neuron does not offload optimizer state or parameters", "parallel")
        if spec.optimizer.name != "adamw":
            no(f"finetune_llama.py trains with NeuronTrainingArguments' AdamW, not {spec.optimizer.name}",
               "optimizer")
    else:
        no(f"optimum-neuron's split is planned for training and generate, not {t.kind}", "parallel", "task")
    for text, setting in ((t.prompt, "task.prompt"), (spec.model.ref, "model")):
        held = placeholder_in(text or "")
        if held:
            no(f"optimum-neuron's commands take this text on their command line, where {held} is a plan "
               "placeholder and would be filled in", setting)
    return out


def _env(env: dict[str, str], training: bool) -> dict[str, str]:
    # the example's own compiler flags (or neuronx-cc's defaults); no worker here to read its variables
    out = {k: v for k, v in env.items() if k != "NEURON_CC_FLAGS" and not k.startswith("ACCELCTL_")}
    return {**out, **TRAIN_ENV} if training else out


def training_launches(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob, torchrun: list[str],
                      env: dict[str, str]) -> tuple[list[Launch], list[str]]:
    """torchrun finetune_llama.py with NeuronTrainingArguments' split, and what it means."""
    p, b, ms = target.parallel, target.batch, spec.measure
    tp, pp = max(p.tp, 1), max(p.pp, 1)
    dp = target.world_size // (tp * pp)
    zero_1 = p.strategy == "zero"
    args = [*option("--model_id", job.model.ref), "--do_train", "--max_steps", str(ms.warmup + ms.steps * ms.repeat),
            "--per_device_train_batch_size", str(b.micro), "--gradient_accumulation_steps", str(b.accumulation),
            "--learning_rate", repr(spec.optimizer.lr), "--tensor_parallel_size", str(tp),
            "--pipeline_parallel_size", str(pp), "--zero_1", str(zero_1).lower(), "--logging_steps", "1",
            "--seed", str(spec.seed), "--output_dir", f"{RUN_DIR}/output", "--overwrite_output_dir"]
    if target.precision.dtype == "bf16":
        args.append("--bf16")
    if target.gradient_checkpointing:
        args.append("--gradient_checkpointing")
    argv = (*torchrun, f"{OPTIMUM_NEURON}/{TRAIN_EXAMPLE}", *args)
    launch = Launch("finetune_llama", argv, _env(env, True), processes=target.devices)
    notes = [
        f"optimum-neuron {VERSION} {TRAIN_EXAMPLE} (NeuronTrainingArguments, neuronx-distributed): "
        f"tp {tp} x pp {pp} x dp {dp} over {target.world_size} NeuronCores",
        f"tensor parallel {tp}: q/k/v, gate/up column-parallel, o/down row-parallel, embeddings and LM head "
        f"vocabulary-parallel: each core holds 1/{tp} of the weights, gradients and activations of its stage; "
        "key/value heads replicated up to tp where fewer (kv_size_multiplier); sequence parallel between them "
        "(neuronx-distributed's default, with or without sequence_parallel = on: accelctl does not pass "
        "--disable_sequence_parallel)",
        ("ZeRO-1 (--zero_1 true): the optimizer state (fp32 master weights and Adam moments) sharded over the "
         f"{dp} data-parallel ranks" if zero_1 else
         f"--zero_1 false: the optimizer state replicated on the {dp} data-parallel ranks"),
        f"finetune_llama.py trains LoRA adapters (r 64) on databricks/databricks-dolly-15k, packed to 2048 tokens: "
        f"its own data and method, not the workload's {spec.dataset.kind} data; the memory above is the full "
        "fine-tune's, an upper bound of it",
    ]
    if pp > 1:
        notes.insert(2, f"pipeline parallel {pp}: contiguous blocks per stage, NeuronTrainingArguments folds "
                        "gradient accumulation into the pipeline's micro-batches")
    return [launch], notes


def generate_launches(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob,
                      env: dict[str, str]) -> tuple[list[Launch], list[str], list[str]]:
    """The export, then generation.py on it; notes and warnings."""
    t, tp = spec.task, max(target.parallel.tp, 1)
    seq = sequence_length(spec)
    export = ("optimum-cli", "export", "neuron", *option("--model", job.model.ref), "--task", "text-generation",
              "--instance_type", target.device, "--batch_size", str(target.batch.micro), "--sequence_length", str(seq),
              "--tensor_parallel_size", str(tp), EXPORT_DIR)
    run = ("python", f"{OPTIMUM_NEURON}/{GENERATE_EXAMPLE}", EXPORT_DIR, *option("--prompts", t.prompt or " "),
           "--length", str(t.max_new_tokens), "--seed", str(spec.seed))
    launches = [Launch("export", export, _env(env, False), processes=1, wait=True),
                Launch("generation", run, _env(env, False), processes=1)]
    heads = int(spec.model.real_shape.get("heads", 0) or 0)
    kv = int(spec.model.real_shape.get("kv_heads", 0) or heads)
    padded = heads + (-heads) % tp if heads else 0
    notes = [f"optimum-neuron {VERSION}: optimum-cli export neuron compiles the NxD decoder for {target.device}, "
             f"batch {target.batch.micro}, sequence length {seq} (prompt room {spec.dataset.prompt_tokens or PROMPT_ROOM} "
             f"+ {t.max_new_tokens} new tokens, rounded up to {SEQUENCE_QUANTUM}), tensor parallel over {tp} NeuronCore(s) "
             "(tp_degree) in one process",
             "dtype: the checkpoint's config.json torch_dtype (the exporter drops --auto_cast_type for NxD decoders)"]
    if heads and tp > 1:
        notes.append(f"tp {tp}: each NeuronCore holds 1/{tp} of every weight matrix and of the KV cache; query heads "
                     f"{heads}" + (f" padded to {padded}" if padded != heads else "") + f", key/value heads {kv}"
                     + (f" replicated to {max(tp, kv) if tp % kv == 0 else padded}" if kv < tp else ""))
    warnings = []
    if t.decoding == "greedy":
        warnings.append("generation.py samples (do_sample, top_k 50, top_p 0.9): the workload's greedy decoding is "
                        "not what it runs; it times one generate call (the measure block's steps are not applied)")
    return launches, notes, warnings

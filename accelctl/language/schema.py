"""What may be written where: the keys of every block, as data.

The check pass reads these tables; adding a key is adding a row.  Each table maps a
key to its value type (``accelctl.language.values``).
"""

from __future__ import annotations

from accelctl.dsl import ast
from accelctl.language import plugins, te_versions
from accelctl.language import values as V
from accelctl.catalog import DEVICES
from accelctl.models.catalog import WRITTEN
from accelctl.workload.options import KINDS, OPTIONS, OptionKey

TASK_KINDS = ("pretrain", "finetune", "generate", "infer")
TRAINING = ("pretrain", "finetune")

#: task key -> (type, task kinds that accept it)
TASK_KEYS: dict[str, tuple[V.VType, tuple[str, ...]]] = {
    "objective": (V.choice("mlm", "causal_lm", "seq2seq", "classification").explained(
        "training objective",
        unset="by model family: bert → mlm, t5 → seq2seq, vit → classification, others → causal_lm"), TRAINING),
    "train_steps": (V.integer(1, 10**9, unit_dim="steps").explained(
        "optimizer steps of the real job (projected time and cost); not what is run",
        unset="0 (unknown)"), TRAINING),
    "prompt": (V.string().explained(
        "the prompt text",
        unset='"DeepSpeed is a machine learning framework"'), ("generate",)),
    "max_new_tokens": (V.integer(1, 1_000_000, unit_dim="tokens").explained(
        "tokens generated per call (exactly this many)",
        unset="required"), ("generate",)),
    "decoding": (V.choice("greedy", "sample").explained("search"), ("generate",)),
    "kv_cache": (V.VType("on/off/static", lambda v, ctx, key: kv_cache_value(v, ctx, key),
                         "on, off (also true/false ...), dynamic (= on: grows per token), static (pre-allocated "
                         "for prompt + max_new_tokens: fixed shapes, what compiled decoding needs)").explained(
        "reuse the key/value cache between tokens; static pre-allocates it (fixed shapes: what compiled decoding "
        "needs)",
        unset="on (dynamic)", lands=("task.kv_cache", "task.kv_cache_layout")),
                 ("generate",)),
    "batch_size": (V.integer(1, 1_000_000, unit_dim="samples").explained(
        "prompts or images per call: shorthand for `batch { micro = N }`",
        unset="1", lands=("batch.micro",)), ("generate", "infer")),
    "inference_steps": (V.integer(1, 10_000, unit_dim="steps").explained(
        "denoising steps per image batch (diffusion)",
        unset="0 (the pipeline's default)"), ("infer",)),
    "guidance_scale": (V.number(0.0, 100.0).explained(
        "classifier-free guidance scale (diffusion; 1 disables it)"), ("infer",)),
}
KV_CACHE_LAYOUTS = ("dynamic", "static")
_ON_OFF = V.boolean()


def kv_cache_value(v, ctx: V.Ctx, key: str):
    """``kv_cache = on|off|dynamic|static`` -> "dynamic", "static" or "" (off)."""
    if isinstance(v, ast.Word) and v.name in KV_CACHE_LAYOUTS:
        return v.name
    on = _ON_OFF.fn(v, ctx, key)
    return on if on is V.BAD else ("dynamic" if on else "")


GENERATION_KEYS = {"prompt", "max_new_tokens", "decoding", "kv_cache"}

MODEL_KEYS: dict[str, V.VType] = {
    "family": V.choice(*WRITTEN).explained(
        "architecture family, when the Hub id is not in the model catalog",
        unset="from the catalog or stand_in"),
    "weights": V.choice("auto", "real", "random", "stand_in").explained(
        "real: load them (an error if they cannot be had); random: random weights in the architecture the target "
        "builds; auto: real when reachable, else random; stand_in: the older spelling of random"),
    "gradient_checkpointing": V.boolean().explained(
        "recompute activations in the backward pass", unset="off",
        lands=("gradient_checkpointing", "model.gradient_checkpointing")),
    # where the real shape comes from (accelctl.language.check_shape): a config.json path, and
    # whether validate/plan/estimate may fetch it from the Hub (never unless asked)
    "config": V.string().explained(
        "the model's config.json (a file, or a folder holding one; relative to the workload file): its real shape "
        "for plans and estimates",
        unset='"" (a local model\'s folder, else the HF cache)',
        lands=("model.real_shape", "model.params", "architecture")),
    "hub": V.choice("online", "offline").explained(
        "online: validate/plan/estimate may fetch config.json (only) from the Hub, bounded to 10 s",
        unset="offline", lands=(), read_by="validate, plan and estimate: whether they may fetch config.json"),
}

DATASET_KEYS: dict[str, V.VType] = {
    "seq_len": V.integer(1, 1_000_000, unit_dim="tokens").explained(
        "tokens per sample (source length for seq2seq)"),
    "target_len": V.integer(1, 1_000_000, unit_dim="tokens").explained("target tokens per sample (seq2seq)"),
    "image_size": V.integer(8, 8192).explained("image height and width in pixels"),
    "channels": V.integer(1, 64).explained("image channels"),
    "classes": V.integer(2, 10_000_000).explained("number of classes (classification)"),
    "config": V.string(lines=False).explained(
        "config name of a Hub dataset, `load_dataset(id, config)`: required by some (cnn_dailymail: 1.0.0, 2.0.0, "
        "3.0.0); Hub datasets only",
        unset='"" (none)'),
    "split": V.string(lines=False).explained(
        "split to load (of a Hub dataset, or the name local files are loaded as)"),
    "column": V.string(lines=False).explained(
        "text column (the source of seq2seq)",
        unset='"" (the catalog\'s, else `text`, else the first text column)'),
    "target_column": V.string(lines=False).explained(
        "seq2seq: the summary column used as the target (e.g. `highlights`)",
        unset='"" (the catalog\'s for seq2seq, else the text\'s continuation)'),
    "prompt_tokens": V.integer(1, 1_000_000, unit_dim="tokens").explained(
        "generation from a dataset: keep this many prompt tokens of each record",
        unset="0 (all)"),
    "mlm_probability": V.number(0.0, 1.0, positive=True).explained("masked-LM masking probability"),
}
DATASET_SOURCES = ("synthetic", "files", "hf")

FP8_KEYS: dict[str, V.VType] = {
    "format": V.choice("hybrid", "e4m3").explained("hybrid: E4M3 forward, E5M2 backward; e4m3: E4M3 both ways"),
    "amax_history": V.integer(1, 1_000_000).explained("amax history length of delayed scaling"),
    "amax_algo": V.choice("max", "most_recent").explained("how the scale is computed from the history"),
    "margin": V.integer(0, 64).explained("scaling margin (powers of 2)"),
    "library": V.choice("transformer_engine", "torchao").explained(
        "transformer_engine: TE layers and FP8 autocast (delayed scaling); torchao: `convert_to_float8_training` "
        "(Float8Linear, dynamic scaling; training only)"),
    "recipe": V.choice("tensorwise", "rowwise").explained(
        "torchao only: tensorwise (one scale per tensor; FSDP2 all-gathers the weights in FP8) or rowwise (one "
        "scale per row, E4M3 throughout, power-of-2 scales; more accurate, slower)",
        lands=("precision.fp8.recipe", "precision.fp8.format")),
}
#: the fp8 keys of Transformer Engine's delayed scaling, which torchao's float8 (dynamic scaling) has not
FP8_DELAYED_SCALING_KEYS = ("amax_history", "amax_algo", "margin")
PRECISIONS = ("fp32", "bf16", "fp16", "fp8")

BATCH_KEYS: dict[str, V.VType] = {
    "micro": V.integer(1, 1_000_000, unit_dim="samples").explained("samples per device per micro-step"),
    "accumulation": V.integer(1, 1_000_000).explained("micro-steps per optimizer step (gradient accumulation)"),
    "global": V.integer(1, 10**9, unit_dim="samples").explained(
        "samples per optimizer step over all data-parallel ranks; checked: global = micro × accumulation × "
        "data-parallel size",
        unset="derived", lands=("batch.global_size",)),
}

OPTIMIZERS = ("adamw", "adam", "sgd", "lamb")
OPTIMIZER_KEYS: dict[str, V.VType] = {
    "lr": V.number(hi=100.0, positive=True).explained("learning rate"),
    "weight_decay": V.number(0.0, 10.0).explained("weight decay"),
    "momentum": V.number(0.0, 1.0).explained("momentum (sgd)"),
    "grad_clip": V.number(0.0, 1e6).explained("clip the gradient norm to this (0 = off)"),
}

MEASURE_KEYS: dict[str, V.VType] = {
    "warmup": V.integer(0, 1_000_000, unit_dim="steps").explained(
        "steps run first and excluded from the figures (compilation, caches)"),
    "steps": V.integer(1, 10_000_000, unit_dim="steps").explained(
        "steps counted per repeat; must be more than warmup"),
    "repeat": V.integer(1, 100).explained(
        "independent runs: `accelctl run` starts the workload this many times, each a fresh process (one series); "
        "`accelctl compare` needs 3 a side for a verdict"),
}

#: ``optimize { ... }``: how the worker runs the model, per workload or per target (the target's
#: keys over the workload's); which backends can do each is the backend plug-in's to say
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIMIZE_KEYS: dict[str, V.VType] = {
    "compile": V.boolean().explained(
        "`torch.compile` the model (inductor; on a CPU it needs a C++ compiler); compiled in the warm-up steps, "
        "reported apart (`compile_s`, `compiles`, `recompiles` after warm-up); generation: transformers compiles "
        "the decoding step (needs `kv_cache = static`)"),
    "compile_mode": V.choice(*COMPILE_MODES).explained("torch.compile's mode (needs `compile = on`)"),
    "channels_last": V.boolean().explained(
        "weights and 4-D image inputs in the channels-last (NHWC) memory format (image models: vit, "
        "stable_diffusion)"),
}

CHECKPOINT_KEYS: dict[str, V.VType] = {
    "every": V.integer(1, 10_000_000, unit_dim="steps").explained(
        "save the training state after every this many optimizer steps (warm-up steps count)",
        unset="required"),
    "keep": V.integer(1, 1000).explained(
        "complete checkpoints kept; older ones are deleted once a newer one is complete"),
    "dir": V.string(lines=False).explained(
        "folder for the checkpoints (relative to the workload file); each run saves under `<dir>/<run id>/`",
        unset="`checkpoints/` in the run folder"),
}

#: ``track { ... }``: live logging of the run to experiment trackers (accelctl.run.tracking)
TRACK_KEYS: dict[str, V.VType] = {
    "mlflow": V.tracking_uri().explained(
        "MLflow tracking URI the runner logs the run to, live: `sqlite:///PATH` (relative to the workload file; "
        "`sqlite:////abs/PATH` absolute), `file:PATH`, `http(s)://HOST:PORT`",
        unset="no MLflow"),
    "wandb": V.project_name().explained(
        "W&B project the runner logs the run to, offline (`$WANDB_DIR`, else the run folder; `wandb sync` uploads)",
        unset="no W&B"),
    "experiment": V.string().explained(
        "MLflow experiment (and W&B group) of the runs",
        unset="the workload's name"),
    "tensorboard": V.boolean().explained(
        "a TensorBoard event file in the run folder's `tensorboard/`, written live"),
}

#: engine blocks that configure a launcher rather than place runs: ``engine deepspeed { hosts = ... }``
LAUNCHER_BLOCKS = ("deepspeed",)


#: ``engine <name> { ... }`` blocks -> their settings: each engine's row (``plugins.ENGINES``:
#: small modules importing only the value types, never the engine), then the DeepSpeed
#: launcher's block (backend deepspeed's, not an engine)
ENGINE_KEYS: dict[str, dict[str, V.VType]] = {
    **{name: dict(plugins.engine_row(name).settings) for name in plugins.ENGINES},
    "deepspeed": {
        "hosts": V.hostname_list(),
        "hostfile": V.path(),
        "master_addr": V.hostname(),
        "master_port": V.integer(1, 65535),
        "ssh": V.boolean(),
        "launcher": V.choice("pdsh", "openmpi", "mvapich", "slurm", "impi"),
    },
}
#: the engines a target may name (``engine = ...``): the plug-ins of accelctl.plan.registry.ENGINES
ENGINES = tuple(k for k in ENGINE_KEYS if k not in LAUNCHER_BLOCKS)

#: the backends a target may name (``backend = ...``), from the plug-in table
BACKENDS = tuple(plugins.BACKENDS)



def option_type(row: OptionKey) -> V.VType:
    """The row of a target option's key: its checker, from its row's kind, and its meaning."""
    return _option_checker(row).explained(row.doc, row.unset, lands=row.lands or (), read_by=row.read_by)


def _option_checker(row: OptionKey) -> V.VType:
    if row.kind == "boolean":
        return V.boolean()
    if row.kind == "integer":
        return V.integer(row.lo, row.hi)
    if row.kind == "choice":
        return V.choice(*row.choices)
    if row.kind == "te_version":
        return te_versions.te_version()
    raise ValueError(f"a target option of unknown kind {row.kind!r} (kinds: {', '.join(KINDS)})")


#: what the machine a target names sets in its job: the device settings, and on the host the
#: stand-in architecture, its scale and offline Hub access
MACHINE = ("device", "architecture", "scale", "hub")

TARGET_KEYS: dict[str, V.VType] = {
    "device": V.choice(*DEVICES, code="E502").explained(
        "device kind (the device catalog)",
        unset="the instance's device, or the target's name if it is a device kind", lands=MACHINE),
    "instance": V.name_or_string().explained(
        "instance type (the instance catalog gives device, count, price)",
        unset='""', lands=MACHINE, read_by="the plan: the catalog's device, device count and price"),
    "nodes": V.integer(1, 100_000).explained("number of nodes (instances)", lands=(),
                                             read_by="the launch: the engine's node count"),
    "devices": V.integer(1, 1024).explained("devices per node", unset="the instance's device count, else 1",
                                            lands=(), read_by="the launch: processes per node"),
    "price": V.quantity("price").explained(
        "price of the whole allocation per hour (overrides the catalog)",
        unset="instance price × nodes", lands=(), read_by="estimate, pick, sweep and reports"),
    "memory": V.quantity("bytes", lo=1).explained(
        "memory per device (overrides the catalog)",
        unset="the device's memory", lands=(), read_by="the plan's memory fit, estimate and fit"),
    "micro_batch": V.integer(1, 1_000_000, unit_dim="samples").explained(
        "samples per device per micro-step for this target",
        unset="the workload's batch micro", lands=("batch.micro",)),
    "gradient_checkpointing": V.boolean().explained(
        "recompute activations (this target)",
        unset="the workload's setting", lands=("gradient_checkpointing",)),
    # the engines (accelctl.plan.registry.ENGINES): every block of ENGINE_KEYS but the DeepSpeed
    # launcher's, which configures backend deepspeed's own launch and places nothing by itself
    # (so ``engine = deepspeed`` is refused here, not first validated and then refused by plan)
    "engine": V.choice(*ENGINES, code="E508", not_these={
        "deepspeed": "deepspeed is not an engine: `engine deepspeed { hosts = ... }` configures the DeepSpeed "
                     "launcher that backend deepspeed (parallel = zero(...)) starts under the target's engine "
                     f"({', '.join(ENGINES)})"}).explained(
        "how it is launched: local or an `engine` block of the workload", lands=(),
        read_by="the launch: the engine's command and files"),
    "backend": V.choice(*BACKENDS).explained(
        "force a backend instead of the planner's choice",
        unset="chosen by the planner", lands=("backend",)),
    # the options, one row each: accelctl.workload.options
    **{name: option_type(row) for name, row in OPTIONS.items()},
}
#: target keys handled by the check pass itself (not plain typed values)
TARGET_SPECIAL = ("parallel", "precision", "batch", "measure", "optimizer", "optimize", "stack")
#: target keys that become options (``TargetSpec.options``)
TARGET_OPTIONS = tuple(OPTIONS)

PARALLEL_STRATEGIES: dict[str, tuple[str, ...]] = {
    "none": (),
    "data": (),
    "fsdp": ("tp", "reshard_after_forward", "offload", "sequence_parallel"),
    "zero": ("stage", "tp", "pp", "offload_optimizer", "offload_param"),
    "deepspeed_inference": ("tp", "kernel_inject"),
    "tensor": ("tp", "sequence_parallel"),
    "pipeline": ("pp", "schedule"),
}
PARALLEL_ALIASES = {"ddp": "data"}
#: strategies that shard training state (not for generate/infer tasks), and those for inference only
TRAINING_STRATEGIES = ("zero", "fsdp")
INFERENCE_STRATEGIES = ("deepspeed_inference",)
OFFLOAD = V.choice("none", "cpu", "nvme")
PARALLEL_ARGS: dict[str, V.VType] = {
    "stage": V.integer().explained("ZeRO stage 0–3 (`zero` only)", unset="0"),
    "tp": V.integer(1, 1024).explained("tensor-parallel size"),
    "pp": V.integer(1, 1024).explained("pipeline-parallel size"),
    "offload_optimizer": OFFLOAD.explained("ZeRO optimizer-state offload (stage ≥ 1)"),
    "offload_param": OFFLOAD.explained("ZeRO parameter offload (stage 3)"),
    "kernel_inject": V.boolean().explained("DeepSpeed-inference kernel injection"),
    "reshard_after_forward": V.boolean().explained(
        "FSDP: free a block's gathered parameters after its forward (ZeRO-3 memory; off: keep them for backward, "
        "ZeRO-2 memory)"),
    "offload": V.choice("none", "cpu").explained(
        "FSDP: parameter shards, gradients and the optimizer step on the host"),
    "schedule": V.choice("gpipe", "one_f_one_b").explained(
        "pipeline schedule (`torch.distributed.pipelining`): gpipe, one_f_one_b (1F1B; needs accumulation ≥ pp)"),
    "sequence_parallel": V.boolean().explained(
        "tensor parallel's sequence parallel: norms, residuals and dropouts on 1/tp of the sequence (all-gather "
        "before, reduce-scatter after each split region); tp > 1, tp dividing the sequence"),
}

WORKLOAD_BLOCKS = ("task", "model", "dataset", "precision", "batch", "optimizer", "measure", "checkpoint", "optimize",
                   "track", "stack",
                   "engine", "target")
WORKLOAD_KEYS: dict[str, V.VType] = {
    "description": V.string().explained("one line shown in plans and reports", unset='""', lands=(),
                                        read_by="plans, reports and the run store"),
    "seed": V.integer(0, 2**31 - 1).explained("random seed of data and stand-in weights"),
    "gradient_checkpointing": V.boolean().explained(
        "recompute activations in the backward pass (all targets)",
        unset="off"),
}


#: the key tables of docs/language.md, by block (the task's without the kinds that take each key)
KEY_TABLES: dict[str, dict[str, V.VType]] = {
    "workload": WORKLOAD_KEYS, "task": {k: t for k, (t, _) in TASK_KEYS.items()}, "model": MODEL_KEYS,
    "dataset": DATASET_KEYS, "fp8": FP8_KEYS, "batch": BATCH_KEYS, "optimizer": OPTIMIZER_KEYS,
    "measure": MEASURE_KEYS, "checkpoint": CHECKPOINT_KEYS, "optimize": OPTIMIZE_KEYS, "track": TRACK_KEYS,
    "target": TARGET_KEYS, "parallel": PARALLEL_ARGS,
}
#: where a table's keys land in the job: the ``WorkerJob`` field that holds the block (``""``: the
#: job itself), each key under its own name there (``FIELD_NAMES`` where the names differ) unless
#: its row says otherwise (``VType.lands``); None: every row of the table says
JOB_BLOCKS: dict[str, str | None] = {
    "workload": "", "task": "task", "model": "model", "dataset": "data", "fp8": "precision.fp8", "batch": "batch",
    "optimizer": "optimizer", "measure": "measure", "checkpoint": "checkpoint", "optimize": "optimize",
    "parallel": "parallel", "target": None,
}
#: tables no job carries, and what reads them instead
READ_BY: dict[str, str] = {"track": "the runner, live (its trackers); the worker never sees it"}
#: (table, key) -> the workload type's field where the names differ
FIELD_NAMES: dict[tuple[str, str], str] = {("batch", "global"): "global_size", ("parallel", "stage"): "zero_stage"}


def landing(table: str, key: str) -> tuple[tuple[str, ...], str]:
    """Where ``key`` of ``table`` lands in the job: the ``WorkerJob`` fields it sets (dotted
    paths), or none and what reads it instead."""
    row = KEY_TABLES[table][key]
    if row.lands is not None:
        return row.lands, row.read_by
    if table in READ_BY:
        return (), READ_BY[table]
    block = JOB_BLOCKS[table]
    if block is None:
        raise ValueError(f"the row of {table} key {key!r} does not say where it lands in the job")
    name = FIELD_NAMES.get((table, key), key)
    return (f"{block}.{name}" if block else name,), ""

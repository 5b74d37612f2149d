"""What may be written where: the keys of every block, as data.

The check pass reads these tables; adding a key is adding a row.  Each table maps a
key to its value type (``accelctl.language.values``).
"""

from __future__ import annotations

from accelctl.dsl import ast
from accelctl.language import plugins, te_versions
from accelctl.language import values as V
from accelctl.catalog import DEVICES
from accelctl.models.catalog import FAMILIES
from accelctl.workload.options import KINDS, OPTIONS, OptionKey

TASK_KINDS = ("pretrain", "finetune", "generate", "infer")
TRAINING = ("pretrain", "finetune")

#: task key -> (type, task kinds that accept it)
TASK_KEYS: dict[str, tuple[V.VType, tuple[str, ...]]] = {
    "objective": (V.choice("mlm", "causal_lm", "seq2seq", "classification"), TRAINING),
    "train_steps": (V.integer(1, 10**9, unit_dim="steps"), TRAINING),
    "prompt": (V.string(), ("generate",)),
    "max_new_tokens": (V.integer(1, 1_000_000, unit_dim="tokens"), ("generate",)),
    "decoding": (V.choice("greedy", "sample"), ("generate",)),
    "kv_cache": (V.VType("on/off/static", lambda v, ctx, key: kv_cache_value(v, ctx, key),
                         "on, off (also true/false ...), dynamic (= on: grows per token), static (pre-allocated "
                         "for prompt + max_new_tokens: fixed shapes, what compiled decoding needs)"),
                 ("generate",)),
    "batch_size": (V.integer(1, 1_000_000, unit_dim="samples"), ("generate", "infer")),
    "inference_steps": (V.integer(1, 10_000, unit_dim="steps"), ("infer",)),
    "guidance_scale": (V.number(0.0, 100.0), ("infer",)),
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
    "family": V.choice(*FAMILIES),
    "weights": V.choice("auto", "real", "random", "stand_in"),
    "gradient_checkpointing": V.boolean(),
    # where the real shape comes from (accelctl.language.check_shape): a config.json path, and
    # whether validate/plan/estimate may fetch it from the Hub (never unless asked)
    "config": V.string(),
    "hub": V.choice("online", "offline"),
}

DATASET_KEYS: dict[str, V.VType] = {
    "seq_len": V.integer(1, 1_000_000, unit_dim="tokens"),
    "target_len": V.integer(1, 1_000_000, unit_dim="tokens"),
    "image_size": V.integer(8, 8192),
    "channels": V.integer(1, 64),
    "classes": V.integer(2, 10_000_000),
    "config": V.string(lines=False),
    "split": V.string(lines=False),
    "column": V.string(lines=False),
    "target_column": V.string(lines=False),
    "prompt_tokens": V.integer(1, 1_000_000, unit_dim="tokens"),
    "mlm_probability": V.number(0.0, 1.0, positive=True),
}
DATASET_SOURCES = ("synthetic", "files", "hf")

FP8_KEYS: dict[str, V.VType] = {
    "format": V.choice("hybrid", "e4m3"),
    "amax_history": V.integer(1, 1_000_000),
    "amax_algo": V.choice("max", "most_recent"),
    "margin": V.integer(0, 64),
    "library": V.choice("transformer_engine", "torchao"),
    "recipe": V.choice("tensorwise", "rowwise"),
}
#: the fp8 keys of Transformer Engine's delayed scaling, which torchao's float8 (dynamic scaling) has not
FP8_DELAYED_SCALING_KEYS = ("amax_history", "amax_algo", "margin")
PRECISIONS = ("fp32", "bf16", "fp16", "fp8")

BATCH_KEYS: dict[str, V.VType] = {
    "micro": V.integer(1, 1_000_000, unit_dim="samples"),
    "accumulation": V.integer(1, 1_000_000),
    "global": V.integer(1, 10**9, unit_dim="samples"),
}

OPTIMIZERS = ("adamw", "adam", "sgd", "lamb")
OPTIMIZER_KEYS: dict[str, V.VType] = {
    "lr": V.number(hi=100.0, positive=True),
    "weight_decay": V.number(0.0, 10.0),
    "momentum": V.number(0.0, 1.0),
    "grad_clip": V.number(0.0, 1e6),
}

MEASURE_KEYS: dict[str, V.VType] = {
    "warmup": V.integer(0, 1_000_000, unit_dim="steps"),
    "steps": V.integer(1, 10_000_000, unit_dim="steps"),
    "repeat": V.integer(1, 100),
}

#: ``optimize { ... }``: how the worker runs the model, per workload or per target (the target's
#: keys over the workload's); which backends can do each is the backend plug-in's to say
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIMIZE_KEYS: dict[str, V.VType] = {
    "compile": V.boolean(),
    "compile_mode": V.choice(*COMPILE_MODES),
    "channels_last": V.boolean(),
}

CHECKPOINT_KEYS: dict[str, V.VType] = {
    "every": V.integer(1, 10_000_000, unit_dim="steps"),
    "keep": V.integer(1, 1000),
    "dir": V.string(lines=False),
}

#: ``track { ... }``: live logging of the run to experiment trackers (accelctl.run.tracking)
TRACK_KEYS: dict[str, V.VType] = {
    "mlflow": V.tracking_uri(),
    "wandb": V.project_name(),
    "experiment": V.string(),
    "tensorboard": V.boolean(),
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
    """The checker of a target option's values, from its row's kind."""
    if row.kind == "boolean":
        return V.boolean()
    if row.kind == "integer":
        return V.integer(row.lo, row.hi)
    if row.kind == "choice":
        return V.choice(*row.choices)
    if row.kind == "te_version":
        return te_versions.te_version()
    raise ValueError(f"a target option of unknown kind {row.kind!r} (kinds: {', '.join(KINDS)})")


TARGET_KEYS: dict[str, V.VType] = {
    "device": V.choice(*DEVICES, code="E502"),
    "instance": V.name_or_string(),
    "nodes": V.integer(1, 100_000),
    "devices": V.integer(1, 1024),
    "price": V.quantity("price"),
    "memory": V.quantity("bytes", lo=1),
    "micro_batch": V.integer(1, 1_000_000, unit_dim="samples"),
    "gradient_checkpointing": V.boolean(),
    # the engines (accelctl.plan.registry.ENGINES): every block of ENGINE_KEYS but the DeepSpeed
    # launcher's, which configures backend deepspeed's own launch and places nothing by itself
    # (so ``engine = deepspeed`` is refused here, not first validated and then refused by plan)
    "engine": V.choice(*ENGINES, code="E508", not_these={
        "deepspeed": "deepspeed is not an engine: `engine deepspeed { hosts = ... }` configures the DeepSpeed "
                     "launcher that backend deepspeed (parallel = zero(...)) starts under the target's engine "
                     f"({', '.join(ENGINES)})"}),
    "backend": V.choice(*BACKENDS),
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
    "stage": V.integer(),
    "tp": V.integer(1, 1024),
    "pp": V.integer(1, 1024),
    "offload_optimizer": OFFLOAD,
    "offload_param": OFFLOAD,
    "kernel_inject": V.boolean(),
    "reshard_after_forward": V.boolean(),
    "offload": V.choice("none", "cpu"),
    "schedule": V.choice("gpipe", "one_f_one_b"),
    "sequence_parallel": V.boolean(),
}

WORKLOAD_BLOCKS = ("task", "model", "dataset", "precision", "batch", "optimizer", "measure", "checkpoint", "optimize",
                   "track", "stack",
                   "engine", "target")
WORKLOAD_KEYS: dict[str, V.VType] = {
    "description": V.string(),
    "seed": V.integer(0, 2**31 - 1),
    "gradient_checkpointing": V.boolean(),
}

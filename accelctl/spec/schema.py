"""What may be written where: the keys of every block, as data.

The check pass reads these tables; adding a key is adding a row.  Each table maps a
key to its value type (``accelctl.spec.values``).
"""

from __future__ import annotations

from accelctl.spec import plugins
from accelctl.spec import values as V
from accelctl.spec.catalog import DEVICES
from accelctl.spec.models import FAMILIES

TASK_KINDS = ("pretrain", "finetune", "generate", "infer")
TRAINING = ("pretrain", "finetune")

#: task key -> (type, task kinds that accept it)
TASK_KEYS: dict[str, tuple[V.VType, tuple[str, ...]]] = {
    "objective": (V.choice("mlm", "causal_lm", "seq2seq", "classification"), TRAINING),
    "train_steps": (V.integer(1, 10**9, unit_dim="steps"), TRAINING),
    "prompt": (V.string(), ("generate",)),
    "max_new_tokens": (V.integer(1, 1_000_000, unit_dim="tokens"), ("generate",)),
    "decoding": (V.choice("greedy", "sample"), ("generate",)),
    "kv_cache": (V.boolean(), ("generate",)),
    "batch_size": (V.integer(1, 1_000_000, unit_dim="samples"), ("generate", "infer")),
    "inference_steps": (V.integer(1, 10_000, unit_dim="steps"), ("infer",)),
    "guidance_scale": (V.number(0.0, 100.0), ("infer",)),
}
GENERATION_KEYS = {"prompt", "max_new_tokens", "decoding", "kv_cache"}

MODEL_KEYS: dict[str, V.VType] = {
    "family": V.choice(*FAMILIES),
    "weights": V.choice("auto", "real", "random", "stand_in"),
    "gradient_checkpointing": V.boolean(),
}

DATASET_KEYS: dict[str, V.VType] = {
    "seq_len": V.integer(1, 1_000_000, unit_dim="tokens"),
    "target_len": V.integer(1, 1_000_000, unit_dim="tokens"),
    "image_size": V.integer(8, 8192),
    "channels": V.integer(1, 64),
    "classes": V.integer(2, 10_000_000),
    "config": V.string(),
    "split": V.string(),
    "column": V.string(),
    "target_column": V.string(),
    "prompt_tokens": V.integer(1, 1_000_000, unit_dim="tokens"),
    "mlm_probability": V.number(0.0, 1.0, positive=True),
}
DATASET_SOURCES = ("synthetic", "files", "hf")

FP8_KEYS: dict[str, V.VType] = {
    "format": V.choice("hybrid", "e4m3"),
    "amax_history": V.integer(1, 1_000_000),
    "amax_algo": V.choice("max", "most_recent"),
    "margin": V.integer(0, 64),
}
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
    "repeat": V.integer(1, 1000),
}

ENGINE_KEYS: dict[str, dict[str, V.VType]] = {
    "local": {},
    "torchrun": {
        "rdzv_backend": V.choice("c10d", "static"),
        "rdzv_endpoint": V.string(),
        "rdzv_id": V.name_or_string(),
        "join_timeout": V.quantity("time"),
        "max_restarts": V.integer(0, 100),
        "master_port": V.integer(1, 65535),
    },
    "deepspeed": {
        "hosts": V.string_list(),
        "hostfile": V.string(),
        "master_addr": V.string(),
        "master_port": V.integer(1, 65535),
        "ssh": V.boolean(),
        "launcher": V.choice("pdsh", "openmpi", "mvapich", "slurm", "impi"),
    },
    "slurm": {
        "partition": V.string(),
        "account": V.string(),
        "qos": V.string(),
        "constraint": V.string(),
        "time_limit": V.quantity("time"),
        "cpus_per_task": V.integer(1, 4096),
        "mem": V.quantity("bytes"),
        "gres": V.string(),
        "container_image": V.string(),
    },
    "kubernetes": {
        "namespace": V.string(),
        "image": V.string(),
        "service_account": V.string(),
        "priority_class": V.string(),
        "cpu": V.integer(1, 4096),
        "memory": V.quantity("bytes"),
        "efa": V.boolean(),
    },
    "aws_batch": {
        "job_queue": V.string(),
        "job_definition": V.string(),
        "image": V.string(),
        "role_arn": V.string(),
        "efa": V.boolean(),
        "vcpus": V.integer(1, 4096),
        "memory": V.quantity("bytes"),
        "attempts": V.integer(1, 10),
    },
}

#: the backends a target may name (``backend = ...``), from the plug-in table
BACKENDS = tuple(plugins.BACKENDS)

TARGET_KEYS: dict[str, V.VType] = {
    "device": V.choice(*DEVICES, code="E502"),
    "instance": V.name_or_string(),
    "nodes": V.integer(1, 100_000),
    "devices": V.integer(1, 1024),
    "price": V.quantity("price"),
    "memory": V.quantity("bytes", lo=1),
    "micro_batch": V.integer(1, 1_000_000, unit_dim="samples"),
    "gradient_checkpointing": V.boolean(),
    "engine": V.choice(*ENGINE_KEYS, code="E508"),
    "backend": V.choice(*BACKENDS),
    "hpu_graphs": V.boolean(),
    "lazy_mode": V.boolean(),
    "te_layers": V.boolean(),
    "dataloader_workers": V.integer(0, 1024),
    "threads": V.integer(1, 1024),
    "weights": V.choice("auto", "real", "random", "stand_in"),
    "neuron_parallel_compile": V.boolean(),
    # what the launcher starts: accelctl's own loop (worker), or the backend's documented
    # vendor example script (example: optimum-habana's run_generation.py / run_clm.py ...)
    "script": V.choice("worker", "example"),
    # the Transformer Engine version the plan targets (its autocast API changed in 2.9)
    "te_version": V.string(),
    # Hugging Face Hub access of the worker (weights, configs, datasets)
    "hub": V.choice("online", "offline"),
}
#: target keys handled by the check pass itself (not plain typed values)
TARGET_SPECIAL = ("parallel", "precision", "batch", "measure", "optimizer")
#: target keys that become backend options
TARGET_OPTIONS = ("hpu_graphs", "lazy_mode", "te_layers", "dataloader_workers", "threads", "weights",
                  "neuron_parallel_compile", "script", "te_version", "hub")

PARALLEL_STRATEGIES: dict[str, tuple[str, ...]] = {
    "none": (),
    "data": (),
    "fsdp": (),
    "zero": ("stage", "tp", "pp", "offload_optimizer", "offload_param"),
    "deepspeed_inference": ("tp", "kernel_inject"),
    "tensor": ("tp",),
    "pipeline": ("pp",),
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
}

WORKLOAD_BLOCKS = ("task", "model", "dataset", "precision", "batch", "optimizer", "measure", "engine", "target")
WORKLOAD_KEYS: dict[str, V.VType] = {
    "description": V.string(),
    "seed": V.integer(0, 2**31 - 1),
    "gradient_checkpointing": V.boolean(),
}

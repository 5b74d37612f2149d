"""The worker's input: one JSON file the plan writes and every launched process reads.

A ``WorkerJob`` is everything the training/inference loop needs, resolved for one
target: no defaults are left for the worker to guess.  The planner builds it from a
``WorkloadSpec`` and a target; the worker (``python -m accelctl.worker JOB``)
reads it back.  Plain data only, so it prints in a plan and round-trips through JSON.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelJob:
    #: architecture family: bloom, gpt2, llama, bert, t5, vit, stable_diffusion
    family: str
    #: where real weights come from: "hf" (Hub id), "local" (path) or "arch" (random init)
    source: str
    #: Hub id or local path; empty for "arch"
    ref: str = ""
    #: shape used when building from a config (random weights): layers, hidden, heads, ...
    #: keys are the DSL's (layers, hidden, heads, ffn, vocab, image_size, patch, classes ...)
    config: dict[str, Any] = field(default_factory=dict)
    #: "real" loads weights from ``ref``; "stand_in" builds ``config`` with random weights;
    #: "auto" loads real weights when present locally, else the stand-in
    weights: str = "auto"


@dataclass(frozen=True)
class DataJob:
    #: synthetic, files (local path), hf (Hub id, with a local fallback)
    kind: str = "synthetic"
    ref: str = ""
    #: fallback when ``kind == "hf"`` cannot be loaded offline: "synthetic" or a local path
    fallback: str = "synthetic"
    seq_len: int = 128
    target_len: int = 32
    image_size: int = 224
    channels: int = 3
    classes: int = 1000
    column: str = ""
    #: prompt tokens kept from each record (generation from a dataset)
    prompt_tokens: int = 0
    #: masked-LM probability (BERT pre-training)
    mlm_probability: float = 0.15


@dataclass(frozen=True)
class TaskJob:
    #: pretrain, finetune, generate, infer
    kind: str
    #: generation
    prompt: str = ""
    max_new_tokens: int = 0
    decoding: str = "greedy"
    kv_cache: bool = True
    #: diffusion inference
    inference_steps: int = 0
    guidance_scale: float = 7.5


@dataclass(frozen=True)
class PrecisionJob:
    #: fp32, bf16, fp16, fp8
    dtype: str = "fp32"
    #: Transformer Engine recipe when dtype == fp8: format, amax_history, amax_algo, margin
    fp8: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OptimizerJob:
    name: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.0
    grad_clip: float = 0.0


@dataclass(frozen=True)
class MeasureJob:
    #: steps run first and excluded from steady-state figures
    warmup: int = 2
    #: steps counted per repeat
    steps: int = 10
    #: measured phase repeated this many times (warm-up once)
    repeat: int = 1


@dataclass(frozen=True)
class WorkerJob:
    run_id: str
    workload: str
    target: str
    #: backend name from the plan registry (cpu, torchrun, deepspeed, ...)
    backend: str
    #: device kind from the catalog (cpu, a100, h100, gaudi2, trn1, ...)
    device: str
    task: TaskJob
    model: ModelJob
    data: DataJob
    precision: PrecisionJob
    optimizer: OptimizerJob
    measure: MeasureJob
    #: per-device micro-batch and gradient accumulation
    micro_batch: int = 1
    accumulation: int = 1
    gradient_checkpointing: bool = False
    seed: int = 0
    #: intra-op threads per process (torch.set_num_threads)
    threads: int = 1
    #: backend options that the worker's device adapter reads (hpu_graphs, lazy_mode, tp ...)
    options: dict[str, Any] = field(default_factory=dict)
    #: folder where each rank appends ``rank<N>.jsonl``; filled in by the runner
    events_dir: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WorkerJob":
        parts = {
            "task": TaskJob,
            "model": ModelJob,
            "data": DataJob,
            "precision": PrecisionJob,
            "optimizer": OptimizerJob,
            "measure": MeasureJob,
        }
        kw = dict(d)
        for key, sub in parts.items():
            kw[key] = sub(**kw[key])
        return cls(**kw)

    @classmethod
    def load(cls, path: str | Path) -> "WorkerJob":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

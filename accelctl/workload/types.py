"""WorkloadSpec: the typed, validated, frozen form of a workload.

Built only by the check pass (``accelctl.language.check``).  Every field is resolved:
units are converted (bytes, seconds, USD per hour, counts), defaults are filled in,
and each target carries its effective settings (workload-level settings with the
target's overrides applied), so planners never look back at the AST.
"""

from __future__ import annotations

import json
from typing import Any

from accelctl.errors import Span
from accelctl.frozen import Value, field, replace, to_dict, uncompared
from accelctl.workload.options import TargetOptions


class TaskSpec(Value):
    #: pretrain, finetune, generate or infer
    kind: str
    #: training objective: mlm, causal_lm, seq2seq, classification (default by model family)
    objective: str = ""
    #: optimizer steps of the real job (for projected cost); 0 = unknown
    train_steps: int = 0
    #: generation: the prompt text
    prompt: str = ""
    #: generation: tokens generated per call (exactly this many: min = max)
    max_new_tokens: int = 0
    #: generation: greedy or sample
    decoding: str = "greedy"
    #: generation: reuse the key/value cache between tokens
    kv_cache: bool = True
    #: generation: how that cache is held: dynamic (grows by a token each step) or static
    #: (pre-allocated for prompt + max_new_tokens: fixed shapes, transformers'
    #: ``cache_implementation="static"``, what compiled decoding needs)
    kv_cache_layout: str = "dynamic"
    #: diffusion: denoising steps per image batch
    inference_steps: int = 0
    #: diffusion: classifier-free guidance scale (1 disables it)
    guidance_scale: float = 7.5

    @property
    def training(self) -> bool:
        return self.kind in ("pretrain", "finetune")


class ModelSpec(Value):
    #: hf (Hub id), local (path) or arch (architecture + size, random init)
    source: str
    #: architecture family from the model catalog (bloom, bert, t5, vit, ...)
    family: str
    #: Hub id or local path (empty for arch)
    ref: str = ""
    #: shape of the stand-in built with random weights (family defaults filled in)
    stand_in: dict[str, Any] = field(default_factory=dict)
    #: architecture of the real model when known (the sizes written for an arch source, the
    #: catalog's for a catalogued Hub id): what accelerator targets build and estimate
    real_shape: dict[str, Any] = field(default_factory=dict)
    #: published parameter count of a catalogued model (0 = count it from the architecture)
    params: float = 0.0
    #: auto (real weights when present locally, else stand-in), real, stand_in
    weights: str = "auto"
    #: ``gradient_checkpointing`` written in the model block (None = not written there)
    gradient_checkpointing: bool | None = None


class DatasetSpec(Value):
    #: synthetic, files (local path: jsonl, csv, parquet, text, an image folder) or hf (Hub id)
    kind: str = "synthetic"
    ref: str = ""
    #: used on a cpu target when a Hub dataset cannot be loaded: "synthetic" or a local
    #: path; "" = none (the run fails)
    fallback: str = ""
    #: Hub config name, ``load_dataset(ref, config)``: "3.0.0" for cnn_dailymail ("" = none)
    config: str = ""
    split: str = "train"
    #: text column (the source of seq2seq); "" = the catalog's, else "text" or the first text column
    column: str = ""
    #: seq2seq: the summary column that is the target ("highlights"); "" = none, the target is
    #: the text's continuation
    target_column: str = ""
    seq_len: int = 128
    target_len: int = 32
    image_size: int = 224
    channels: int = 3
    classes: int = 1000
    #: generation from a dataset: keep this many prompt tokens of each record
    prompt_tokens: int = 0
    mlm_probability: float = 0.15


class Fp8Recipe(Value):
    """Transformer Engine ``DelayedScaling`` settings."""

    #: hybrid (E4M3 forward, E5M2 backward) or e4m3
    format: str = "hybrid"
    amax_history: int = 1024
    #: max or most_recent
    amax_algo: str = "max"
    margin: int = 0
    #: transformer_engine (TE layers and fp8 autocast, delayed scaling) or torchao
    #: (``convert_to_float8_training``: Float8Linear, dynamic scaling)
    library: str = "transformer_engine"
    #: torchao's recipe: tensorwise (one scale per tensor) or rowwise (one per row, E4M3 throughout)
    recipe: str = "tensorwise"


class PrecisionSpec(Value):
    #: fp32, bf16, fp16 or fp8 (mixed precision: master weights stay fp32)
    dtype: str = "fp32"
    fp8: Fp8Recipe | None = None


class BatchSpec(Value):
    #: samples per device per micro-step
    micro: int = 1
    #: micro-steps per optimizer step
    accumulation: int = 1
    #: samples per optimizer step over all data-parallel ranks; None = derived
    global_size: int | None = None


class OptimizerSpec(Value):
    #: adamw, adam, sgd, lamb
    name: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.0
    #: clip the gradient norm to this (0 = off)
    grad_clip: float = 0.0


class MeasureSpec(Value):
    #: steps run first and excluded from steady-state figures (compile, warm caches)
    warmup: int = 2
    #: steps counted per repeat
    steps: int = 10
    #: independent runs (processes) ``accelctl run`` starts, one series; the worker itself
    #: runs ``repeat`` measured rounds of a job (``accelctl run`` gives each process one)
    repeat: int = 1


class OptimizeSpec(Value):
    """``optimize { compile = on  compile_mode = default  channels_last = on }``: how the
    worker runs the model (``accelctl.worker.optimize``).  Which backends can do it is theirs
    to say (``Backend.compile_refusal``)."""

    #: ``torch.compile`` the model (inductor); compilation happens in the warm-up steps
    compile: bool = False
    #: torch.compile's mode: default, reduce-overhead (CUDA graphs), max-autotune, max-autotune-no-cudagraphs
    compile_mode: str = "default"
    #: weights and 4-D image inputs in channels-last (NHWC) memory format (image models)
    channels_last: bool = False

    @property
    def any(self) -> bool:
        return self.compile or self.channels_last


class CheckpointSpec(Value):
    """``checkpoint { every = N steps  keep = K  dir = "path" }``: training state saved
    every ``every`` optimizer steps so ``accelctl run --resume RUN_ID`` can continue."""

    #: save after every this many optimizer steps (0 = no checkpoints)
    every: int = 0
    #: complete checkpoints kept (the oldest are deleted after a newer one is complete)
    keep: int = 2
    #: folder for the checkpoints (absolute once planned); "" = ``checkpoints/`` in the run folder
    dir: str = ""


class TrackSpec(Value):
    """``track { mlflow = "URI"  wandb = "project"  experiment = "name"  tensorboard = on }``:
    where the runner logs the run live (``accelctl.run.tracking``), besides its run folder."""

    #: MLflow tracking URI (sqlite:///, file:, http(s)://); "" = no MLflow
    mlflow: str = ""
    #: W&B project (offline files, ``wandb sync`` uploads them); "" = no W&B
    wandb: str = ""
    #: MLflow experiment and W&B group; "" = the workload's name
    experiment: str = ""
    #: a TensorBoard event file in the run folder (``tensorboard/``)
    tensorboard: bool = False
    #: ``accelctl run --tensorboard DIR``: the event file under ``DIR/<run id>/`` instead
    tensorboard_dir: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.mlflow or self.wandb or self.tensorboard)


class ParallelSpec(Value):
    #: none, data, zero, deepspeed_inference, tensor, pipeline, fsdp
    strategy: str = "none"
    #: ZeRO stage 0-3 (strategy zero)
    zero_stage: int = 0
    #: tensor-parallel size
    tp: int = 1
    #: pipeline-parallel size
    pp: int = 1
    #: ZeRO offload targets: none, cpu, nvme
    offload_optimizer: str = "none"
    offload_param: str = "none"
    #: DeepSpeed-inference kernel injection
    kernel_inject: bool = False
    #: FSDP: free each block's gathered parameters after its forward (ZeRO-3 memory) or keep
    #: them until backward (ZeRO-2 memory, one all-gather fewer)
    reshard_after_forward: bool = True
    #: FSDP: parameter shards, gradients and optimizer step on the host (none, cpu)
    offload: str = "none"
    #: pipeline schedule: gpipe, one_f_one_b (1F1B)
    schedule: str = "gpipe"
    #: tensor parallel's sequence parallel: norms, residuals and dropouts on 1/tp of the sequence
    sequence_parallel: bool = False


class EngineSpec(Value):
    #: local, torchrun, deepspeed, slurm, kubernetes, aws_batch
    kind: str = "local"
    #: engine settings, units resolved (seconds, bytes)
    settings: dict[str, Any] = field(default_factory=dict)


class StackSpec(Value):
    """``stack { ... }``: what the target's machine must run (``accelctl.language.stack``)."""

    #: container image to run in ("" = none named)
    image: str = ""
    #: AMI the instances boot, id or name ("" = none named)
    ami: str = ""
    #: synapseai, neuron or cuda ("" = none named), and its version
    sdk: str = ""
    sdk_version: str = ""
    #: pinned Python packages: normalised PyPI name -> release
    packages: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.image or self.ami or self.sdk or self.packages)


class TargetSpec(Value):
    name: str
    #: device kind from the catalog
    device: str
    #: instance type from the catalog or the workload ("" = none named)
    instance: str = ""
    nodes: int = 1
    #: devices per node
    devices: int = 1
    #: USD per hour for the whole allocation (nodes x instance); None = unknown
    price_per_hour: float | None = None
    #: the catalogued instance whose price that is ("" = written in the workload, or none): the
    #: target's own instance, or the smallest holding its devices when it names only a device
    price_from: str = ""
    #: memory per device in bytes (catalog value unless the target overrides it)
    memory_bytes: int = 0
    parallel: ParallelSpec = field(default_factory=ParallelSpec)
    #: effective settings: workload-level values with this target's overrides
    precision: PrecisionSpec = field(default_factory=PrecisionSpec)
    batch: BatchSpec = field(default_factory=BatchSpec)
    gradient_checkpointing: bool = False
    #: engine name (a key of WorkloadSpec.engines, or a built-in: local)
    engine: str = "local"
    #: backend forced by the workload ("" = chosen by the planner)
    backend: str = ""
    #: the options it wrote (hpu_graphs, threads ...), typed: accelctl.workload.options
    options: TargetOptions = field(default_factory=TargetOptions)
    #: this target's own measurement / optimizer (None = the workload's), e.g. a cpu target
    #: that counts fewer steps, or a 16-node target with a larger learning rate
    measure: MeasureSpec | None = None
    optimizer: OptimizerSpec | None = None
    #: effective ``optimize`` settings: the workload's with this target's keys over them
    optimize: OptimizeSpec = field(default_factory=OptimizeSpec)
    #: the software stack its machine runs: the workload's ``stack`` with the target's over it
    stack: StackSpec = field(default_factory=StackSpec)

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices

    @property
    def data_parallel(self) -> int:
        return max(1, self.world_size // (self.parallel.tp * self.parallel.pp))


@uncompared("origins")
class WorkloadSpec(Value):
    name: str
    path: str
    task: TaskSpec
    model: ModelSpec
    dataset: DatasetSpec
    measure: MeasureSpec
    optimizer: OptimizerSpec
    targets: tuple[TargetSpec, ...]
    engines: dict[str, EngineSpec] = field(default_factory=dict)
    description: str = ""
    seed: int = 0
    #: checkpoints of a training run (``every = 0``: none)
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    #: live logging of its runs to experiment trackers (none by default)
    track: TrackSpec = field(default_factory=TrackSpec)
    #: where each setting was written: dotted field path -> span (for diagnostics
    #: raised after checking, e.g. by DeepSpeed's own config validation)
    origins: dict[str, Span] = field(default_factory=dict)

    def target(self, name: str) -> TargetSpec:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    def origin_of(self, target: str, *settings: str) -> Span | None:
        """Where the first of ``settings`` that applies to ``target`` was written: the target's
        own (``targets.<target>.<setting>``), else the workload's (``<setting>``); None when
        neither was written.  Settings are dotted paths as the check pass records them:
        ``precision``, ``parallel``, ``device``, ``batch.micro``, ``task``, ``model`` ..."""
        for setting in settings:
            for path in (f"targets.{target}.{setting}", setting):
                if path in self.origins:
                    return self.origins[path]
        return None

    def for_target(self, target: TargetSpec) -> "WorkloadSpec":
        """This spec with the target's own measure/optimizer in place of the workload's (itself
        where the target has neither: a sweep asks this twice a point)."""
        if target.measure is None and target.optimizer is None:
            return self
        return replace(self, measure=target.measure or self.measure,
                       optimizer=target.optimizer or self.optimizer)

    def to_dict(self) -> dict[str, Any]:
        d = to_dict(self)
        d.pop("origins")
        if not self.track.enabled:  # written only where the workload has a track block
            d.pop("track")
        for t, target in zip(d["targets"], self.targets):  # written only where a stack applies
            t["options"] = target.options.written()
            if target.stack.empty:
                t.pop("stack")
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

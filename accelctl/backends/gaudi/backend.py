"""gaudi: Intel Gaudi / Gaudi2 / Gaudi3 (HPU), launched the way optimum-habana does it.

Multi-card runs go through optimum-habana's launcher, as its examples document::

    python gaudi_spawn.py [--use_deepspeed | --use_mpi] --world_size N SCRIPT ARGS

``gaudi_spawn.py`` (repository ``examples/``, not in the PyPI wheel) hands SCRIPT ARGS to
``optimum.habana.distributed.DistributedRunner``, which prefixes them with
``deepspeed --num_nodes 1 --num_gpus N --no_local_rank --master_port 29500``,
``mpirun -n N ...`` or ``python -um torch.distributed.run --nproc_per_node=N``.
A single card runs SCRIPT directly, as the examples' single-card commands do.

The target's ``script`` option picks SCRIPT:

``worker`` (default)
    accelctl's own loop (``python -m accelctl.worker``, with the worker's hpu device
    adapter and ``accelctl.worker.hpu_extras``).  ``gaudi_spawn.py`` takes a script *path*
    (a positional; ``-m`` would be read as one of its own options), so the plan writes a
    three-line shim, ``accelctl_worker.py``, that runs the worker module.
``example``
    optimum-habana's documented example script for the task: ``run_generation.py``
    (examples/text-generation) for ``generate``; ``run_clm.py`` / ``run_mlm.py``
    (examples/language-modeling) and ``run_summarization.py`` (examples/summarization)
    for training by objective.  The command is the documented one: the script's
    flags are emitted where the workload asks for something the script would not do by
    itself (the script's defaults are data, read from the repository with
    ``scripts/extract_habana_flags.py`` into ``data/optimum_habana_flags.json``), so seed
    003 plans exactly::

        python ../gaudi_spawn.py --use_deepspeed --world_size 8 run_generation.py \\
            --model_name_or_path bigscience/bloomz --use_hpu_graphs --use_kv_cache --max_new_tokens 100

Everything here is data plus small functions; ``accelctl.backends.gaudi.check`` checks the
plans against the installed optimum-habana (its ``GaudiConfig``, ``GaudiTrainingArguments``
and ``DistributedRunner``) and the scripts' recorded flags.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from accelctl.backends.base import BASE_ENV, WORKER, Backend, Built, hub_env, refusal
from accelctl.backends.findings import CheckResult
from accelctl.contract import envnames
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import RUN_DIR, GeneratedFile, Launch, Plan
from accelctl.errors import Diagnostic
from accelctl.spec.catalog import DEVICES
from accelctl.spec.models import objective_for
from accelctl.spec.types import TargetSpec, WorkloadSpec

#: the optimum-habana checkout the example commands run in (``OPTIMUM_HABANA_DIR``); a
#: placeholder like ``{run_dir}``, so a plan prints the same on every machine
OH_DIR = "{optimum_habana}"
FLAGS_FILE = Path(__file__).with_name("data") / "optimum_habana_flags.json"

GAUDI_CONFIG_FILE = "gaudi_config.json"
#: where the worker finds the generated GaudiConfig (as te_fp8's ACCELCTL_TE_CONFIG)
GAUDI_CONFIG_ENV = envnames.GAUDI_CONFIG
WORKER_SHIM = "accelctl_worker.py"
WORKER_SHIM_TEXT = (
    "# gaudi_spawn.py launches a script path; this one runs `python -m accelctl.worker JOB`.\n"
    "import runpy\n"
    "runpy.run_module(\"accelctl.worker\", run_name=\"__main__\", alter_sys=True)\n"
)

#: DistributedRunner's defaults (optimum/habana/distributed/distributed_runner.py) that the
#: plan relies on; gaudi_check compares them with the installed class
MASTER_PORT = 29500


# --------------------------------------------------------------------------- environment
def hpu_env(spec: WorkloadSpec, target: TargetSpec) -> dict[str, str]:
    """The HPU environment of a target, each variable with where it comes from."""
    env: dict[str, str] = {}
    # Lazy mode (graphs accumulated until mark_step) or eager.  Every command in
    # optimum-habana's example READMEs is prefixed with PT_HPU_LAZY_MODE=1 (e.g.
    # examples/text-generation/README.md "Usage"); eager is PT_HPU_LAZY_MODE=0, which must
    # be set before habana_frameworks is imported (optimum/habana/transformers/
    # training_args.py: "PT_HPU_LAZY_MODE=0 needs to be set before library is loaded").
    env["PT_HPU_LAZY_MODE"] = "1" if lazy_mode(target) else "0"
    if not spec.task.training and target.world_size > 1:
        # Collectives recorded in lazy mode, needed by DeepSpeed-inference with HPU graphs:
        # examples/text-generation/utils.py setup_env() sets it (setdefault) whenever
        # WORLD_SIZE > 0, and the image-to-text README passes it on the command line
        # (PT_HPU_LAZY_MODE=1 PT_HPU_ENABLE_LAZY_COLLECTIVES=true python ../gaudi_spawn.py ...).
        env["PT_HPU_ENABLE_LAZY_COLLECTIVES"] = "true"
    return env


def lazy_mode(target: TargetSpec) -> bool:
    """Lazy mode is the HPU default (optimum-habana's ``use_lazy_mode`` defaults to True)."""
    return bool(target.options.get("lazy_mode", True))


# --------------------------------------------------------------------------- GaudiConfig
def gaudi_config(spec: WorkloadSpec, target: TargetSpec) -> dict[str, Any]:
    """``gaudi_config.json``: the keys of ``optimum.habana.GaudiConfig`` the target decides.

    * ``use_torch_autocast``: bf16 mixed precision through ``torch.autocast("hpu")`` (fp8
      also runs inside bf16 autocast, as in seed 002); fp32 runs without it.
    * ``use_fused_adam``: Habana's ``hpex.optimizers.FusedAdamW`` replaces AdamW when
      training (GaudiTrainer does the swap; so does the worker's hpu adapter, through hpu_extras).
    * ``use_fused_clip_norm``: ``hpex.normalization.FusedClipNorm`` when gradients are clipped.

    ``autocast_bf16_ops`` / ``autocast_fp32_ops`` are left out: HPU autocast's built-in op
    lists apply, and GaudiConfig only installs custom lists when both are given, before
    ``habana_frameworks`` is first imported (``declare_autocast_bf16_fp32_ops``).
    """
    dtype = target.precision.dtype
    training = spec.task.training
    return {
        "use_torch_autocast": dtype in ("bf16", "fp8"),
        "use_fused_adam": training and spec.optimizer.name in ("adamw", "adam"),
        "use_fused_clip_norm": training and spec.optimizer.grad_clip > 0,
    }


# --------------------------------------------------------------------------- example scripts
@lru_cache(maxsize=1)
def flags_data() -> dict[str, Any]:
    """The recorded argument tables of optimum-habana's scripts (see scripts/extract_habana_flags.py)."""
    return json.loads(FLAGS_FILE.read_text(encoding="utf-8"))


def script_defaults(path: str) -> dict[str, Any]:
    """``--flag`` -> default of an argparse script, from the recorded table."""
    out = {}
    for row in flags_data()["scripts"][path]["options"]:
        for name in row["names"]:
            out[name] = row.get("default")
    return out


#: task/objective -> (folder under examples/, script, training flags by shape field)
EXAMPLES: dict[str, tuple[str, str, dict[str, str]]] = {
    "generate": ("examples/text-generation", "run_generation.py", {}),
    "causal_lm": ("examples/language-modeling", "run_clm.py", {"seq_len": "--block_size"}),
    "mlm": ("examples/language-modeling", "run_mlm.py",
            {"seq_len": "--max_seq_length", "mlm_probability": "--mlm_probability"}),
    "seq2seq": ("examples/summarization", "run_summarization.py",
                {"seq_len": "--max_source_length", "target_len": "--max_target_length"}),
}
#: HF Trainer ``--optim`` of the workload's optimizers (adamw is the default: no flag)
TRAINER_OPTIM = {"adamw": None, "adam": None, "sgd": "sgd"}
#: characters that gaudi_spawn.py would pass unquoted to ``bash -c``: it joins SCRIPT ARGS
#: into one command line, double-quoting only the arguments that contain a space
SHELL_SPECIAL = set('"$`\\\'!*?[]{}<>|&;()~#\n')


def example_key(spec: WorkloadSpec) -> str:
    """generate, or the training objective (the job's default by model family when unset)."""
    if spec.task.kind == "generate":
        return "generate"
    return objective_for(spec.model.family, spec.task.objective)


def script_mode(target: TargetSpec) -> str:
    return str(target.options.get("script", "worker"))


# --------------------------------------------------------------------------- the backend
class GaudiBackend(Backend):
    name = "gaudi"
    adapters = ("hpu",)
    precisions = ("fp32", "bf16", "fp8")
    strategies = ("none", "data", "deepspeed_inference")
    summary = "Intel Gaudi through optimum-habana: gaudi_spawn.py, lazy mode, HPU graphs, GaudiConfig"

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        dev = DEVICES[target.device]
        if dev.adapter != "hpu":
            return out

        def no(reason: str, *settings: str) -> None:
            out.append(refusal(spec, target, reason, *settings))

        dtype = target.precision.dtype
        if dtype == "fp16":
            no("Gaudi runs 16-bit as bf16 (seed 000: bf16 on Gaudi where A100 uses fp16); set precision = bf16",
               "precision")
        if dtype == "fp8" and not dev.fp8:
            no(f"fp8 needs Gaudi2 or Gaudi3, not {target.device}", "precision")
        if target.nodes > 1:
            no("multi-node Gaudi (gaudi_spawn.py --hostfile with DeepSpeed) is not planned yet; use nodes = 1", "nodes")
        if target.options.get("hpu_graphs") and not lazy_mode(target):
            # optimum/habana/transformers/training_args.py __post_init__: "--use_hpu_graphs_for_inference
            # and --use_hpu_graphs_for_training cannot be used in eager mode. Please set --use_lazy_mode"
            no("HPU graphs need lazy mode (optimum-habana refuses HPU graphs in eager mode); "
               "set lazy_mode = on or hpu_graphs = off", "lazy_mode", "hpu_graphs")
        if target.parallel.strategy == "deepspeed_inference" and spec.task.training:
            no("deepspeed_inference is for generate/infer tasks", "parallel")
        if script_mode(target) == "example":
            self._example_unsupported(spec, target, no)
        return out

    # ..................................................................... example-mode limits
    def _example_unsupported(self, spec: WorkloadSpec, target: TargetSpec, no: Callable[..., None]) -> None:
        """Limits of the example scripts: ``no(reason, *settings)`` for each."""
        key = example_key(spec)
        t, m, d, p = spec.task, spec.model, spec.dataset, target.parallel
        if spec.task.kind == "infer" or key not in EXAMPLES:
            no(f"no optimum-habana example script is planned for {t.kind} ({key}); use script = worker", "script")
            return
        if m.source not in ("hf", "local"):
            no("the example scripts load pretrained weights: the model must be hf(\"...\") or a local "
               "path; use script = worker for an architecture-only model", "model")
        if target.precision.dtype == "fp8":
            no("fp8 with the example scripts needs Intel Neural Compressor's measure/quantize passes "
               "(QUANT_CONFIG), which are not planned; use precision = bf16", "precision")
        if key == "generate":
            if target.world_size > 1 and p.strategy != "deepspeed_inference":
                no("run_generation.py on several cards shards the model with DeepSpeed-inference: "
                   f"use parallel = deepspeed_inference(tp = {target.world_size})", "parallel", "devices")
            if p.strategy == "deepspeed_inference" and p.tp != target.world_size:
                no(f"run_generation.py sets the tensor-parallel size to the world size "
                   f"({target.world_size}), not tp = {p.tp}", "parallel")
            if target.world_size > 1 and target.precision.dtype == "fp32":
                no("run_generation.py under DeepSpeed always loads the model in bf16; set precision = bf16",
                   "precision")
            if d.kind == "files":
                no("run_generation.py reads prompts from --prompt or a Hub --dataset_name, not local files",
                   "dataset")
            if p.kernel_inject:
                no("run_generation.py chooses DeepSpeed's injection policy itself; remove kernel_inject", "parallel")
        else:
            if d.kind == "synthetic":
                no("the example training scripts train on a dataset: use dataset hf(\"...\") or "
                   "files(\"...\"), or script = worker for synthetic data", "dataset", "script")
            if spec.optimizer.name not in TRAINER_OPTIM:
                no(f"optimizer {spec.optimizer.name} has no HF Trainer --optim; use adamw, adam or sgd", "optimizer")
            if spec.optimizer.name == "sgd" and spec.optimizer.momentum > 0:
                no("HF Trainer's --optim sgd takes no momentum; use script = worker for SGD with momentum",
                   "optimizer.momentum", "optimizer")
            if p.strategy not in ("none", "data"):
                no(f"{p.strategy} with the example training scripts is not planned; use parallel = data", "parallel")
        for arg in self._example_args(spec, target) if target.world_size > 1 else ():
            if SHELL_SPECIAL & set(arg.replace(RUN_DIR, "")):
                no(f"gaudi_spawn.py passes arguments to bash unescaped (it only double-quotes those "
                   f"with spaces): {arg!r} would be changed by the shell", "script")
                break

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """optimum-habana itself, in its own environment (``accelctl.backends.gaudi.check``)."""
        from accelctl.backends.gaudi.check import check_results

        return check_results(plan)

    # ..................................................................... build
    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        env = dict(BASE_ENV, **hub_env(job), **hpu_env(spec, target))
        if script_mode(target) == "example":
            return self._build_example(spec, target, job, env)
        return self._build_worker(spec, target, job, env)

    def launcher(self, spec: WorkloadSpec, target: TargetSpec) -> list[str]:
        """gaudi_spawn.py's own flags; empty for one card (the script runs directly)."""
        n = target.world_size
        if n == 1:
            return []
        p = target.parallel.strategy
        if p == "deepspeed_inference":
            return ["--use_deepspeed", "--world_size", str(n)]
        if script_mode(target) == "example" and spec.task.training:
            # the language-modeling README's multi-card DDP command: --world_size 8 --use_mpi
            return ["--use_mpi", "--world_size", str(n)]
        # accelctl's worker reads torchrun's RANK / LOCAL_RANK / WORLD_SIZE, which the plain
        # gaudi_spawn.py launch (torch.distributed.run) and the DeepSpeed launcher set; mpirun
        # would give it OMPI_COMM_WORLD_* instead
        return ["--world_size", str(n)]

    def _build_worker(self, spec, target, job, env) -> Built:
        cfg = gaudi_config(spec, target)
        env[GAUDI_CONFIG_ENV] = f"{RUN_DIR}/{GAUDI_CONFIG_FILE}"
        if "threads" in target.options:
            # only when asked: the planning host's core count says nothing about a Gaudi server's
            env["OMP_NUM_THREADS"] = str(job.threads)
        files = [GeneratedFile(GAUDI_CONFIG_FILE, json.dumps(cfg, indent=2, sort_keys=True) + "\n",
                               role="GaudiConfig (optimum-habana): autocast, fused AdamW, fused clip-norm; "
                                    "read by the worker's hpu_extras")]
        notes = [f"lazy mode {'on' if lazy_mode(target) else 'off'}, HPU graphs "
                 f"{'on' if target.options.get('hpu_graphs') else 'off'}, {target.precision.dtype}"]
        n = target.world_size
        if n == 1:
            argv = ("python", *WORKER)
            launch = Launch("worker", argv, env, processes=1)
        else:
            files.append(GeneratedFile(WORKER_SHIM, WORKER_SHIM_TEXT,
                                       role="gaudi_spawn.py's training script: runs accelctl.worker"))
            argv = ("python", "gaudi_spawn.py", *self.launcher(spec, target), f"{RUN_DIR}/{WORKER_SHIM}",
                    f"{RUN_DIR}/job.json")
            launch = Launch("gaudi_spawn", argv, env, processes=n, cwd=f"{OH_DIR}/examples")
            notes.append("gaudi_spawn.py runs: " + " ".join(spawned_prefix(self.launcher(spec, target)))
                         + f" {RUN_DIR}/{WORKER_SHIM} {RUN_DIR}/job.json")
        return Built([launch], files, notes)

    def _build_example(self, spec, target, job, env) -> Built:
        folder, script, _ = EXAMPLES[example_key(spec)]
        args = self._example_args(spec, target, job)
        n = target.world_size
        spawn = self.launcher(spec, target)
        argv = ("python", "../gaudi_spawn.py", *spawn, script, *args) if n > 1 else ("python", script, *args)
        files: list[GeneratedFile] = []
        notes = [f"optimum-habana example {folder}/{script} (flags recorded from "
                 f"{flags_data()['source']['repository']}@{flags_data()['source']['commit'][:12]})"]
        if spec.task.training:
            files.append(GeneratedFile(GAUDI_CONFIG_FILE,
                                       json.dumps(gaudi_config(spec, target), indent=2, sort_keys=True) + "\n",
                                       role="GaudiConfig for --gaudi_config_name"))
        else:
            notes += self._generation_notes(spec, target)
        if spec.model.source == "hf":
            notes.append(f"{script} downloads {spec.model.ref} from the Hugging Face Hub unless it is cached"
                         + (" (hub = offline: it must be cached)" if job.hub == "offline" else ""))
        if n > 1:
            notes.append("gaudi_spawn.py runs: " + " ".join(spawned_prefix(spawn)) + f" {script} ...")
        return Built([Launch(script.removesuffix(".py"), argv, env, processes=n, cwd=f"{OH_DIR}/{folder}")],
                     files, notes)

    def _example_args(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob | None = None) -> list[str]:
        key = example_key(spec)
        if key not in EXAMPLES:
            return []
        return generation_args(spec, target, job) if key == "generate" else training_args(spec, target, job)

    def _generation_notes(self, spec, target) -> list[str]:
        out = []
        if target.world_size > 1 and target.precision.dtype == "bf16":
            out.append("bf16: run_generation.py loads the model in bf16 whenever DeepSpeed runs it (no --bf16 needed)")
        return out


# --------------------------------------------------------------------------- flags
RUN_GENERATION = "examples/text-generation/run_generation.py"


def generation_args(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob | None = None) -> list[str]:
    """run_generation.py's flags: what the workload asks for that the script would not do
    by itself (its defaults are the recorded table), plus ``--max_new_tokens`` always, as
    every documented command spells out the length it measures."""
    t, d = spec.task, spec.dataset
    defaults = script_defaults(RUN_GENERATION)
    prompts = flags_data()["scripts"][RUN_GENERATION].get("default_prompts", [])
    batch = target.batch.micro
    args = ["--model_name_or_path", job.model.ref if job else spec.model.ref]
    # under DeepSpeed (WORLD_SIZE > 0) the script loads bf16 regardless; one card needs the flag
    if target.precision.dtype == "bf16" and target.world_size == 1:
        args.append("--bf16")
    if target.options.get("hpu_graphs"):
        args.append("--use_hpu_graphs")
    if t.kv_cache:
        args.append("--use_kv_cache")
    args += ["--max_new_tokens", str(t.max_new_tokens)]
    if batch != defaults["--batch_size"]:
        args += ["--batch_size", str(batch)]
    if t.decoding == "sample":
        args += ["--do_sample", "--seed", str(spec.seed)]
    if d.kind == "hf":
        args += ["--dataset_name", d.ref]
        if d.column:
            args += ["--column_name", d.column]
        # the script keeps 16 prompt tokens of each record unless told (--max_input_tokens 0)
        if d.prompt_tokens and d.prompt_tokens != 16:
            args += ["--max_input_tokens", str(d.prompt_tokens)]
    elif t.prompt and not (batch == 1 and prompts and t.prompt == prompts[0]):
        # its built-in prompts start with seed 003's; with batch 1 that is the one it uses
        args += ["--prompt", t.prompt]
    warmup, iters = spec.measure.warmup, spec.measure.steps * spec.measure.repeat
    if warmup != defaults["--warmup"]:
        args += ["--warmup", str(warmup)]
    if iters != defaults["--n_iterations"]:
        args += ["--n_iterations", str(iters)]
    return args


def training_args(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob | None = None) -> list[str]:
    """run_clm.py / run_mlm.py / run_summarization.py flags, after the language-modeling
    README's commands (``--use_habana --use_lazy_mode --gaudi_config_name ...
    --throughput_warmup_steps 3``); the GaudiTrainingArguments part is checked against the
    installed class, the script's own dataclass fields against the recorded table."""
    _, _, shape_flags = EXAMPLES[example_key(spec)]
    d, o, b = spec.dataset, spec.optimizer, target.batch
    # local paths as the job resolved them (absolute): the example runs in its own folder
    args = ["--model_name_or_path", job.model.ref if job else spec.model.ref]
    if d.kind == "hf":
        args += ["--dataset_name", d.ref]
    elif d.kind == "files":
        args += ["--train_file", job.data.ref if job else d.ref]
    values = {"seq_len": d.seq_len, "target_len": d.target_len, "mlm_probability": d.mlm_probability}
    for field_name, flag in shape_flags.items():
        args += [flag, str(values[field_name])]
    if spec.model.family == "t5" and example_key(spec) == "seq2seq":
        args += ["--source_prefix", "summarize: "]
    args += ["--per_device_train_batch_size", str(b.micro)]
    if b.accumulation > 1:
        args += ["--gradient_accumulation_steps", str(b.accumulation)]
    args += ["--learning_rate", repr(o.lr), "--max_grad_norm", repr(o.grad_clip)]
    if o.weight_decay:
        args += ["--weight_decay", repr(o.weight_decay)]
    if TRAINER_OPTIM.get(o.name):
        args += ["--optim", TRAINER_OPTIM[o.name]]
    m = spec.measure
    args += ["--max_steps", str(m.warmup + m.steps * m.repeat), "--throughput_warmup_steps", str(m.warmup),
             "--do_train", "--output_dir", f"{RUN_DIR}/output", "--seed", str(spec.seed),
             "--use_habana", "--gaudi_config_name", f"{RUN_DIR}/{GAUDI_CONFIG_FILE}"]
    if lazy_mode(target):
        args.append("--use_lazy_mode")
    else:
        # GaudiTrainingArguments.use_lazy_mode defaults to True: eager must say so
        args += ["--use_lazy_mode", "False"]
    if target.options.get("hpu_graphs"):
        args.append("--use_hpu_graphs_for_training")
    if target.precision.dtype == "bf16":
        args.append("--bf16")
    if target.gradient_checkpointing:
        args.append("--gradient_checkpointing")
    return args


def spawned_prefix(spawn_flags: list[str], python: str = "python") -> list[str]:
    """What ``DistributedRunner`` puts before SCRIPT for gaudi_spawn.py's flags (single node):
    optimum/habana/distributed/distributed_runner.py ``create_single_node_setup*``.  The MPI
    form's ``--map-by socket:PE=<cores per rank>`` depends on the host's ``lscpu``."""
    n = int(spawn_flags[spawn_flags.index("--world_size") + 1]) if "--world_size" in spawn_flags else 1
    if n <= 1:
        return [python]
    if "--use_deepspeed" in spawn_flags:
        return ["deepspeed", "--num_nodes", "1", "--num_gpus", str(n), "--no_local_rank",
                "--master_port", str(MASTER_PORT)]
    if "--use_mpi" in spawn_flags:
        return ["mpirun", "-n", str(n), "--bind-to", "core", "--map-by", "socket:PE=<cores/rank>",
                "--rank-by", "slot", "--report-bindings", "--allow-run-as-root", python]
    return [python, "-um", "torch.distributed.run", f"--nproc_per_node={n}"]

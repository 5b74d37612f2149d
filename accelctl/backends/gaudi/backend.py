"""gaudi: Intel Gaudi / Gaudi2 / Gaudi3 (HPU), launched the way optimum-habana does it.

Multi-card runs go through optimum-habana's ``gaudi_spawn.py [--use_deepspeed | --use_mpi]
--world_size N SCRIPT ARGS`` (its ``DistributedRunner``), with ``--master_port {free_port}`` so
two runs on one server do not collide; a single card runs SCRIPT directly.  The target's
``script`` picks SCRIPT: ``worker`` (default: accelctl's loop, through a three-line shim
``accelctl_worker.py``, since gaudi_spawn.py takes a path) or ``example`` (optimum-habana's
documented example script for the task, ``accelctl.backends.gaudi.examples``).

Everything here is data plus small functions; ``accelctl.backends.gaudi.check`` checks the plans
against the installed optimum-habana.  Design notes: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from accelctl.backends.base import BASE_ENV, LAMB_ON_HPU, WORKER, Backend, Built, hub_env, refusal
from accelctl.backends.gaudi.model_types import model_type_limits
from accelctl.backends.gaudi.fsdp import fsdp_file, fsdp_limits, fsdp_notes, split_limits
from accelctl.backends.gaudi.examples import (EXAMPLES, GAUDI_CONFIG_FILE, SD_GAUDI_CONFIG, example_args,
                                              example_diffusion_notes, example_key, example_limits, example_train_file,
                                              example_training_notes, flags_data, lazy_mode, max_grad_norm,
                                              script_mode, GAUDI_FP8_REFUSAL)
from accelctl.contract import envnames
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import FREE_PORT, RUN_DIR, GeneratedFile, Launch, Plan
from accelctl.errors import Diagnostic
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec

if TYPE_CHECKING:  # plan --check's result type: planning (validate's verdict) needs none
    from accelctl.backends.findings import CheckResult

__all__ = ["GaudiBackend", "gaudi_config", "hpu_env", "spawned_prefix", "flags_data", "lazy_mode"]

#: the optimum-habana checkout the example commands run in (``OPTIMUM_HABANA_DIR``); a
#: placeholder like ``{run_dir}``, so a plan prints the same on every machine
OH_DIR = "{optimum_habana}"
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


# --------------------------------------------------------------------------- GaudiConfig
def gaudi_config(spec: WorkloadSpec, target: TargetSpec, clip: float | None = None) -> dict[str, Any]:
    """``gaudi_config.json``: the keys of ``optimum.habana.GaudiConfig`` the target decides:
    ``use_torch_autocast`` (bf16 and fp8; fp32 runs without), ``use_fused_adam`` when training,
    ``use_fused_clip_norm`` when clipping.  The autocast op lists are left out: HPU autocast's
    built-in lists apply (GaudiConfig installs custom ones only when both are given).
    """
    dtype = target.precision.dtype
    training = spec.task.training
    return {
        "use_torch_autocast": dtype in ("bf16", "fp8"),
        "use_fused_adam": training and spec.optimizer.name in ("adamw", "adam"),
        "use_fused_clip_norm": training and (spec.optimizer.grad_clip if clip is None else clip) > 0,
    }


# --------------------------------------------------------------------------- the backend
#: why the plans add ``--master_port`` to a launch the seed wrote without it (seed 003's
#: ``gaudi_spawn.py --use_deepspeed --world_size 8 run_generation.py ...``)
MASTER_PORT_WHY = ("--master_port {free_port}: deliberately not in the seed's command (seed 003 runs gaudi_spawn.py "
                   "--use_deepspeed --world_size 8 without it): gaudi_spawn.py's default port 29500 would make two "
                   "runs on one machine collide, so each run gets a free port of its own; nothing else changes")


def master_port_note(flags: list[str]) -> list[str]:
    """The plan's note on the ``--master_port`` it adds, where it adds one."""
    return [MASTER_PORT_WHY] if "--master_port" in flags else []


class GaudiBackend(Backend):
    name = "gaudi"
    precisions = ("fp32", "bf16", "fp8")
    strategies = ("none", "data", "deepspeed_inference", "fsdp", "tensor", "pipeline")
    summary = "Intel Gaudi through optimum-habana: gaudi_spawn.py, lazy mode, HPU graphs, GaudiConfig"
    compile_refusal = ("Gaudi compiles through its own graph modes: lazy mode (lazy_mode = on, the default) "
                       "accumulates and compiles graphs, HPU graphs (hpu_graphs = on) capture them for replay; "
                       "torch.compile's hpu_backend needs eager mode, which accelctl's Gaudi plans do not use")

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        dev = DEVICES[target.device]
        if dev.adapter not in self.adapters:
            return out

        def no(reason: str, *settings: str) -> None:
            out.append(refusal(spec, target, reason, *settings))

        dtype = target.precision.dtype
        if dtype == "fp16":
            no("Gaudi runs 16-bit as bf16 (seed 000: bf16 on Gaudi where A100 uses fp16); set precision = bf16",
               "precision")
        if dtype == "fp8" and not dev.fp8:
            no(f"fp8 needs Gaudi2 or Gaudi3, not {target.device}", "precision")
        elif dtype == "fp8" and script_mode(target) == "worker":
            # the worker's fp8 is CUDA's (te_fp8: vit, llama-class; torchao on torchrun); it raised
            # "fp8 is implemented for the vit family" on the Gaudi2 itself
            no(GAUDI_FP8_REFUSAL, "precision")
        if target.nodes > 1:
            # DistributedRunner.create_multi_node_setup: `deepspeed --hostfile H --master_addr A ...` from one
            # node, DeepSpeed's pdsh runner reaching the others over ssh; there is no per-node form
            no("multi-node Gaudi through gaudi_spawn.py is a hostfile plus DeepSpeed's ssh launcher from one node, "
               "which accelctl does not plan; use nodes = 1, or parallel = zero(...) (backend deepspeed on hpu, "
               "one launcher per node under engine slurm)", "nodes")
        if target.options.hpu_graphs and not lazy_mode(target):
            # optimum/habana/transformers/training_args.py __post_init__: "--use_hpu_graphs_for_inference
            # and --use_hpu_graphs_for_training cannot be used in eager mode. Please set --use_lazy_mode"
            no("HPU graphs need lazy mode (optimum-habana refuses HPU graphs in eager mode); "
               "set lazy_mode = on or hpu_graphs = off", "lazy_mode", "hpu_graphs")
        if spec.task.training and spec.optimizer.name == "lamb":
            no(LAMB_ON_HPU, "optimizer.name", "optimizer")
        if target.parallel.strategy == "deepspeed_inference" and spec.task.training:
            no("deepspeed_inference is for generate/infer tasks", "parallel")
        elif target.parallel.strategy == "deepspeed_inference" and target.world_size != target.parallel.tp:
            # as backend deepspeed_inference says it (its CPU rehearsal is refused the same way)
            no(f"deepspeed_inference runs one process per tensor-parallel shard: nodes x devices "
               f"= {target.world_size} must equal tp = {target.parallel.tp}", "parallel", "devices")
        if target.parallel.strategy == "fsdp":
            fsdp_limits(spec, target, no, example=script_mode(target) == "example")
        elif target.parallel.strategy in ("tensor", "pipeline"):
            split_limits(spec, target, no, example=script_mode(target) == "example")
        if script_mode(target) == "example":
            example_limits(spec, target, no)
        model_type_limits(spec, no)
        return out

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
        # the DeepSpeed and MPI forms take the master port from gaudi_spawn.py's --master_port
        # (default 29500: two runs at once would collide), so the run's own free port goes there
        port = ["--master_port", FREE_PORT]
        if p == "deepspeed_inference":
            return ["--use_deepspeed", "--world_size", str(n), *port]
        if script_mode(target) == "example" and spec.task.training:
            # the language-modeling README's multi-card DDP command: --world_size 8 --use_mpi
            return ["--use_mpi", "--world_size", str(n), *port]
        # accelctl's worker reads torchrun's RANK / LOCAL_RANK / WORLD_SIZE, which the plain
        # gaudi_spawn.py launch (torch.distributed.run) and the DeepSpeed launcher set; mpirun
        # would give it OMPI_COMM_WORLD_* instead.  That plain form ignores --master_port: a
        # one-node torch.distributed.run without one takes a free port itself (c10d on localhost:0)
        return ["--world_size", str(n)]

    def _build_worker(self, spec, target, job, env) -> Built:
        cfg = gaudi_config(spec, target)
        env[GAUDI_CONFIG_ENV] = f"{RUN_DIR}/{GAUDI_CONFIG_FILE}"
        if target.options.threads is not None:
            # only when asked: the planning host's core count says nothing about a Gaudi server's
            env["OMP_NUM_THREADS"] = str(job.threads)
        role = "GaudiConfig (optimum-habana): autocast, fused AdamW, fused clip-norm; read by the worker's hpu_extras"
        notes = [f"lazy mode {'on' if lazy_mode(target) else 'off'}, HPU graphs "
                 f"{'on' if target.options.hpu_graphs else 'off'}, {target.precision.dtype}"]
        if example_key(spec) == "diffusion":
            role += f"; accelctl's own, in place of {SD_GAUDI_CONFIG} (seed 000's)"
            notes.append(f"GaudiConfig: seed 000 ran with {SD_GAUDI_CONFIG} (text_to_image_generation.py loads it "
                         "with script = example); the worker reads accelctl's own gaudi_config.json "
                         f"(use_torch_autocast {str(cfg['use_torch_autocast']).lower()})")
        files = [GeneratedFile(GAUDI_CONFIG_FILE, json.dumps(cfg, indent=2, sort_keys=True) + "\n", role=role)]
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
            notes += master_port_note(self.launcher(spec, target))
        return Built([launch], files, notes)

    def _build_example(self, spec, target, job, env) -> Built:
        folder, script, _ = EXAMPLES[example_key(spec)]
        args = example_args(spec, target, job)
        n = target.world_size
        spawn = self.launcher(spec, target)
        argv = ("python", "../gaudi_spawn.py", *spawn, script, *args) if n > 1 else ("python", script, *args)
        files: list[GeneratedFile] = []
        notes = [f"optimum-habana example {folder}/{script} (flags recorded from "
                 f"{flags_data()['source']['repository']}@{flags_data()['source']['commit'][:12]})"]
        if spec.task.training and spec.dataset.kind == "files":
            converted = example_train_file(spec, job)
            if converted.file is not None:
                files.append(converted.file)
                notes.append(converted.note)
        if spec.task.training:
            clip = max_grad_norm(spec, target)
            files.append(GeneratedFile(GAUDI_CONFIG_FILE,
                                       json.dumps(gaudi_config(spec, target, clip), indent=2, sort_keys=True) + "\n",
                                       role="GaudiConfig for --gaudi_config_name"))
            notes += example_training_notes(spec, target)
            if target.parallel.strategy == "fsdp":
                files.append(fsdp_file(spec, target))
                notes += fsdp_notes(spec, target)
        elif example_key(spec) == "diffusion":
            notes += example_diffusion_notes(spec, target)
        else:
            notes += self._generation_notes(spec, target)
        if spec.model.source == "hf":
            what = f"{spec.model.ref}'s config and tokenizer" if spec.task.kind == "pretrain" else spec.model.ref
            notes.append(f"{script} downloads {what} from the Hugging Face Hub unless it is cached"
                         + (" (hub = offline: it must be cached)" if job.hub == "offline" else ""))
        if n > 1:
            notes.append("gaudi_spawn.py runs: " + " ".join(spawned_prefix(spawn)) + f" {script} ...")
            notes += master_port_note(spawn)
        return Built([Launch(script.removesuffix(".py"), argv, env, processes=n, cwd=f"{OH_DIR}/{folder}")],
                     files, notes)

    def _generation_notes(self, spec, target) -> list[str]:
        out = []
        if target.world_size > 1 and target.precision.dtype == "bf16":
            out.append("bf16: run_generation.py loads the model in bf16 whenever DeepSpeed runs it (no --bf16 needed)")
        return out


def spawned_prefix(spawn_flags: list[str], python: str = "python") -> list[str]:
    """What ``DistributedRunner`` puts before SCRIPT for gaudi_spawn.py's flags (single node):
    optimum/habana/distributed/distributed_runner.py ``create_single_node_setup*``.  The MPI
    form's ``--map-by socket:PE=<cores per rank>`` depends on the host's ``lscpu``."""
    n = int(spawn_flags[spawn_flags.index("--world_size") + 1]) if "--world_size" in spawn_flags else 1
    if n <= 1:
        return [python]
    if "--use_deepspeed" in spawn_flags:
        port = spawn_flags[spawn_flags.index("--master_port") + 1] if "--master_port" in spawn_flags else MASTER_PORT
        return ["deepspeed", "--num_nodes", "1", "--num_gpus", str(n), "--no_local_rank", "--master_port", str(port)]
    if "--use_mpi" in spawn_flags:
        return ["mpirun", "-n", str(n), "--bind-to", "core", "--map-by", "socket:PE=<cores/rank>",
                "--rank-by", "slot", "--report-bindings", "--allow-run-as-root", python]
    return [python, "-um", "torch.distributed.run", f"--nproc_per_node={n}"]

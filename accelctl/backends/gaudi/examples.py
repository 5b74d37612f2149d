"""optimum-habana's example scripts as the gaudi plans run them (``script = example``).

Each command is the documented one: a script's flags are emitted where the workload asks for
something the script would not do by itself (its defaults are data, recorded by
``scripts/extract_habana_flags.py`` into ``data/optimum_habana_flags.json``), plus what the seeds
spelled out themselves (seed 003's ``--max_new_tokens``, seed 000's dataset config and Gaudi
configuration).  Per script: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from accelctl.backends.base import option
from accelctl.backends.gaudi.data_files import TrainFile, accepted, train_file
from accelctl.backends.gaudi.fsdp import fsdp_args
from accelctl.contract.job import WorkerJob
from accelctl.contract.placeholders import placeholder_in
from accelctl.contract.plan import RUN_DIR
from accelctl.models.catalog import objective_for
from accelctl.workload.types import TargetSpec, WorkloadSpec

FLAGS_FILE = Path(__file__).with_name("data") / "optimum_habana_flags.json"
GAUDI_CONFIG_FILE = "gaudi_config.json"


#: fp8 on Gaudi, in validate, plan and --rehearse alike (read from optimum-habana 1.21.2's source):
#: training FP8 is ``GaudiTrainingArguments(fp8=True)`` -> accelerate's TERecipeKwargs (recipe
#: from ACCELERATE_FP8_* variables) -> every nn.Linear swapped for Intel Gaudi's own
#: ``habana_frameworks...transformer_engine.Linear`` (``accelerate/utils/transformer_engine.py``);
#: inference FP8 is Intel Neural Compressor's measure/quantize passes (QUANT_CONFIG)
GAUDI_FP8_REFUSAL = (
    "fp8 on Gaudi is not built: optimum-habana trains FP8 through Intel Gaudi's own Transformer Engine "
    "(GaudiTrainingArguments fp8 = True swaps every nn.Linear for habana_frameworks' te.Linear), whose signatures "
    "and recipe accelctl cannot check without the Gaudi software stack, and serves FP8 through Intel Neural "
    "Compressor's measure/quantize passes (QUANT_CONFIG); neither is planned: set precision = bf16 for this target")


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
    "diffusion": ("examples/stable-diffusion", "text_to_image_generation.py", {}),
}
RUN_GENERATION = "examples/text-generation/run_generation.py"
TEXT_TO_IMAGE = "examples/stable-diffusion/text_to_image_generation.py"
#: HF Trainer ``--optim`` of the workload's optimizers (adamw is the default: no flag)
TRAINER_OPTIM = {"adamw": None, "adam": None, "sgd": "sgd"}
#: characters that gaudi_spawn.py would pass unquoted to ``bash -c``: it joins SCRIPT ARGS
#: into one command line, double-quoting only the arguments that contain a space
SHELL_SPECIAL = set('"$`\\\'!*?[]{}<>|&;()~#\n')

#: Hub datasets that load only with a config name, and the one to pass when the workload
#: names none (a ``config`` the dataset block gives wins): cnn_dailymail 3.0.0 is the
#: summarization README's (``--dataset_name cnn_dailymail --dataset_config "3.0.0"``) for
#: the T5 fine-tuning of seed 000; wikitext-2-raw-v1 the language-modeling README's
DATASET_CONFIGS = {"cnn_dailymail": "3.0.0", "abisee/cnn_dailymail": "3.0.0", "wikitext": "wikitext-2-raw-v1",
                   "Salesforce/wikitext": "wikitext-2-raw-v1"}
#: run_summarization.py's ``summarization_name_mapping`` rows for these datasets: (text, summary)
SUMMARY_COLUMNS = {"cnn_dailymail": ("article", "highlights"), "abisee/cnn_dailymail": ("article", "highlights")}
#: ``max_grad_norm`` of HF TrainingArguments, which GaudiTrainingArguments keeps: the Trainer
#: clips gradients at 1.0 unless told otherwise (the check reads it back from the installed class)
TRAINER_MAX_GRAD_NORM = 1.0
#: the Gaudi configuration seed 000 ran Stable Diffusion with ("Habana/stable-diffusion Gaudi
#: の構成"), text_to_image_generation.py's default for --gaudi_config_name
SD_GAUDI_CONFIG = "Habana/stable-diffusion"


def example_train_file(spec: WorkloadSpec, job: WorkerJob | None = None) -> TrainFile:
    """``--train_file`` of a training example for a ``dataset files(...)``: as the script
    accepts it, converted at plan time, or refused (``accelctl.backends.gaudi.data_files``)."""
    folder, script, _ = EXAMPLES[example_key(spec)]
    base = Path(spec.path).resolve().parent if spec.path and spec.path != "<input>" else Path.cwd()
    ref = job.data.ref if job else str((base / spec.dataset.ref).expanduser())
    return train_file(f"{folder}/{script}", ref, accepted(flags_data(), f"{folder}/{script}"))


def example_key(spec: WorkloadSpec) -> str:
    """generate, diffusion, or the training objective (the job's default by model family when unset)."""
    if spec.task.kind == "generate":
        return "generate"
    if spec.model.family == "stable_diffusion" and spec.task.kind == "infer":
        return "diffusion"
    return objective_for(spec.model.family, spec.task.objective)


def script_mode(target: TargetSpec) -> str:
    return target.options.script or "worker"


def lazy_mode(target: TargetSpec) -> bool:
    """Lazy mode is the HPU default (optimum-habana's ``use_lazy_mode`` defaults to True), but
    for FSDP, which optimum-habana runs eager (``accelctl.backends.gaudi.fsdp``)."""
    lazy = target.options.lazy_mode
    return target.parallel.strategy != "fsdp" if lazy is None else lazy


def dataset_config(spec: WorkloadSpec) -> str:
    """The Hub dataset's config name: the dataset block's ``config`` (the check pass requires it
    for the datasets it catalogues), else DATASET_CONFIGS' entry for one it does not, else none."""
    d = spec.dataset
    return d.config or DATASET_CONFIGS.get(d.ref, "")


def max_grad_norm(spec: WorkloadSpec, target: TargetSpec) -> float:
    """The clipping the example runs with: the workload's ``grad_clip`` where it writes one
    (0 = no clipping), else the Trainer's default (the DSL's 0 means "not written" there:
    the seed's commands leave clipping to the script)."""
    if spec.origin_of(target.name, "optimizer.grad_clip") is not None:
        return spec.optimizer.grad_clip
    return TRAINER_MAX_GRAD_NORM


# --------------------------------------------------------------------------- flags
def generation_args(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob | None = None) -> list[str]:
    """run_generation.py's flags: what the workload asks for that the script would not do
    by itself (its defaults are the recorded table), plus ``--max_new_tokens`` always, as
    every documented command spells out the length it measures."""
    t, d = spec.task, spec.dataset
    defaults = script_defaults(RUN_GENERATION)
    prompts = flags_data()["scripts"][RUN_GENERATION].get("default_prompts", [])
    batch = target.batch.micro
    args = option("--model_name_or_path", job.model.ref if job else spec.model.ref)
    # under DeepSpeed (WORLD_SIZE > 0) the script loads bf16 regardless; one card needs the flag
    if target.precision.dtype == "bf16" and target.world_size == 1:
        args.append("--bf16")
    if target.options.hpu_graphs:
        args.append("--use_hpu_graphs")
    if t.kv_cache:
        args.append("--use_kv_cache")
    if target.parallel.strategy == "tensor":  # utils.py setup_distributed_model_tp (torch.distributed, hccl)
        args += ["--parallel_strategy", "tp"]
    args += ["--max_new_tokens", str(t.max_new_tokens)]
    if batch != defaults["--batch_size"]:
        args += ["--batch_size", str(batch)]
    if t.decoding == "sample":
        args += ["--do_sample", "--seed", str(spec.seed)]
    if d.kind == "hf":
        args += option("--dataset_name", d.ref)
        if d.column:
            args += option("--column_name", d.column)
        # the script keeps 16 prompt tokens of each record unless told (--max_input_tokens 0)
        if d.prompt_tokens and d.prompt_tokens != 16:
            args += ["--max_input_tokens", str(d.prompt_tokens)]
    elif t.prompt and not (batch == 1 and prompts and t.prompt == prompts[0]):
        # its built-in prompts start with seed 003's; with batch 1 that is the one it uses
        args += option("--prompt", t.prompt)
    warmup, iters = spec.measure.warmup, spec.measure.steps * spec.measure.repeat
    if warmup != defaults["--warmup"]:
        args += ["--warmup", str(warmup)]
    if iters != defaults["--n_iterations"]:
        args += ["--n_iterations", str(iters)]
    return args


def training_args(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob | None = None) -> list[str]:
    """run_clm.py / run_mlm.py / run_summarization.py flags, after the language-modeling and
    summarization READMEs' commands (``--use_habana --use_lazy_mode --gaudi_config_name ...
    --throughput_warmup_steps 3``); the GaudiTrainingArguments part is checked against the
    installed class, the script's own dataclass fields against the recorded table."""
    key = example_key(spec)
    _, _, shape_flags = EXAMPLES[key]
    d, o, b, m = spec.dataset, spec.optimizer, target.batch, spec.model
    # local paths as the job resolved them (absolute): the example runs in its own folder
    ref = job.model.ref if job else m.ref
    if spec.task.kind == "pretrain":
        # pre-training starts from the model's config with random weights, as seed 000's BERT
        # pre-training did (model_config_id bert-base-uncased); the tokenizer is the model's
        args = [*option("--config_name", ref), *option("--tokenizer_name", ref)]
    else:
        args = option("--model_name_or_path", ref)
    if d.kind == "hf":
        args += option("--dataset_name", d.ref)
        if dataset_config(spec):
            args += option("--dataset_config_name", dataset_config(spec))
    elif d.kind == "files":
        tf = example_train_file(spec, job)
        args += option("--train_file", tf.arg or (job.data.ref if job else d.ref))
    values = {"seq_len": d.seq_len, "target_len": d.target_len, "mlm_probability": d.mlm_probability}
    for field_name, flag in shape_flags.items():
        args += [flag, str(values[field_name])]
    if key == "seq2seq":
        if m.family == "t5":
            args += ["--source_prefix", "summarize: "]
        mapped = SUMMARY_COLUMNS.get(d.ref, ("", ""))[0] if d.kind == "hf" else ""
        if d.column and d.column != mapped:
            args += option("--text_column", d.column)
    args += ["--per_device_train_batch_size", str(b.micro)]
    if b.accumulation > 1:
        args += ["--gradient_accumulation_steps", str(b.accumulation)]
    args += ["--learning_rate", repr(o.lr)]
    clip = max_grad_norm(spec, target)
    if clip != TRAINER_MAX_GRAD_NORM:
        args += ["--max_grad_norm", repr(clip)]
    if o.weight_decay:
        args += ["--weight_decay", repr(o.weight_decay)]
    if TRAINER_OPTIM.get(o.name):
        args += ["--optim", TRAINER_OPTIM[o.name]]
    ms = spec.measure
    args += ["--max_steps", str(ms.warmup + ms.steps * ms.repeat), "--throughput_warmup_steps", str(ms.warmup),
             "--do_train", "--output_dir", f"{RUN_DIR}/output", "--seed", str(spec.seed),
             "--use_habana", "--gaudi_config_name", f"{RUN_DIR}/{GAUDI_CONFIG_FILE}"]
    if lazy_mode(target):
        args.append("--use_lazy_mode")
    else:
        # GaudiTrainingArguments.use_lazy_mode defaults to True: eager must say so
        args += ["--use_lazy_mode", "False"]
    if target.options.hpu_graphs:
        args.append("--use_hpu_graphs_for_training")
    if target.precision.dtype == "bf16":
        args.append("--bf16")
    if target.parallel.strategy == "fsdp":
        args += fsdp_args(target)  # checkpointing in its fsdp_config.json
    elif target.gradient_checkpointing:
        args.append("--gradient_checkpointing")
    return args


def diffusion_args(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob | None = None) -> list[str]:
    """text_to_image_generation.py's flags.  The pipeline generates ``num_images_per_prompt``
    images of one prompt in batches of ``batch_size`` and leaves the first
    ``throughput_warmup_steps`` batches (its default 3) out of its timing: warm-up + timed
    batches x batch images, the warm-up batches discarded as seed 000 did (the first 2)."""
    t, ms = spec.task, spec.measure
    defaults = script_defaults(TEXT_TO_IMAGE)
    batch = target.batch.micro
    batches = ms.warmup + ms.steps * ms.repeat
    args = option("--model_name_or_path", job.model.ref if job else spec.model.ref)
    if t.prompt:
        args += option("--prompts", t.prompt)
    args += ["--num_images_per_prompt", str(batches * batch)]
    if batch != defaults["--batch_size"]:
        args += ["--batch_size", str(batch)]
    if t.inference_steps and t.inference_steps != defaults["--num_inference_steps"]:
        args += ["--num_inference_steps", str(t.inference_steps)]
    if t.guidance_scale != defaults["--guidance_scale"]:
        args += ["--guidance_scale", repr(t.guidance_scale)]
    if spec.seed != defaults["--seed"]:
        args += ["--seed", str(spec.seed)]
    args += ["--throughput_warmup_steps", str(ms.warmup), "--image_save_dir", f"{RUN_DIR}/images", "--use_habana"]
    if target.options.hpu_graphs:
        args.append("--use_hpu_graphs")
    args += ["--gaudi_config_name", SD_GAUDI_CONFIG]
    if target.precision.dtype == "bf16":
        args.append("--bf16")
    return args


def example_args(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob | None = None) -> list[str]:
    """The example script's arguments for ``spec`` on ``target`` ([] when none is planned)."""
    key = example_key(spec)
    if key not in EXAMPLES:
        return []
    if key == "generate":
        return generation_args(spec, target, job)
    if key == "diffusion":
        return diffusion_args(spec, target, job)
    return training_args(spec, target, job)


# --------------------------------------------------------------------------- limits and notes
#: why seed 000's BERT pre-training cannot be planned from synthetic data with the example
SEED_000_BERT = (
    "optimum-habana's run_mlm.py trains on text (a Hub dataset or a file), not synthetic tokens, and seed "
    "000's own command is not one of its examples: that run used its own run_mlm.py "
    "(philschmid/deep-learning-habana-huggingface: gaudi_spawn.py --use_mpi --world_size=8 run_mlm.py "
    "--model_config_id bert-base-uncased --dataset_id philschmid/processed_bert_dataset ...) on a dataset "
    "already tokenized into 512-token chunks, which optimum-habana's run_mlm.py cannot read (it tokenizes a "
    "text column). Write dataset hf(\"wikitext\") (the language-modeling README's corpus; the plan passes its "
    "config wikitext-2-raw-v1) or files(\"corpus.txt\"), or keep dataset synthetic with script = worker")


def example_limits(spec: WorkloadSpec, target: TargetSpec, no: Callable[..., None]) -> None:
    """Limits of the example scripts: ``no(reason, *settings)`` for each."""
    key = example_key(spec)
    t, m, d, p = spec.task, spec.model, spec.dataset, target.parallel
    if key not in EXAMPLES or (t.kind == "infer" and key != "diffusion"):
        no(f"no optimum-habana example script is planned for {t.kind} ({key}); use script = worker", "script")
        return
    if m.source not in ("hf", "local"):
        no("the example scripts load pretrained weights: the model must be hf(\"...\") or a local "
           "path; use script = worker for an architecture-only model", "model")
    for text, setting in ((t.prompt, "task.prompt"), (m.ref, "model"), (d.ref, "dataset"), (d.column, "dataset"),
                          (d.config, "dataset")):
        held = placeholder_in(text or "")
        if held:  # the example's argv is a template: the runner would fill it (script = worker takes it as data)
            no(f"the example script takes this text on its command line, where {held} is the plan's placeholder "
               "and would be filled in; use script = worker (its job takes the text as written)", setting, "script")
    if target.precision.dtype == "fp8":
        no(GAUDI_FP8_REFUSAL, "precision")
    if key == "generate":
        if target.world_size > 1 and p.strategy not in ("deepspeed_inference", "tensor"):
            no("run_generation.py on several cards shards the model with DeepSpeed-inference or its own tensor "
               f"parallel: use parallel = deepspeed_inference(tp = {target.world_size}) or tensor(tp = "
               f"{target.world_size})", "parallel", "devices")
        if p.strategy == "tensor" and p.tp != target.world_size:
            no(f"run_generation.py --parallel_strategy tp splits the model over every process "
               f"({target.world_size}), not tp = {p.tp}", "parallel")
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
    elif key == "diffusion":
        if target.world_size > 1:
            no("text_to_image_generation.py on several cards splits the prompts between the processes "
               "(--distributed), which is not planned; use devices = 1 (seed 000 ran one device)",
               "devices", "parallel")
    else:
        if d.kind == "files" and example_train_file(spec).refused:
            no(example_train_file(spec).refused, "dataset")
        if d.kind == "synthetic":
            no(SEED_000_BERT if key == "mlm" else
               "the example training scripts train on a dataset: use dataset hf(\"...\") or "
               "files(\"...\"), or script = worker for synthetic data", "dataset", "script")
        if spec.optimizer.name not in TRAINER_OPTIM:
            no(f"optimizer {spec.optimizer.name} has no HF Trainer --optim; use adamw, adam or sgd", "optimizer")
        if spec.optimizer.name == "sgd" and spec.optimizer.momentum > 0:
            no("HF Trainer's --optim sgd takes no momentum; use script = worker for SGD with momentum",
               "optimizer.momentum", "optimizer")
        if p.strategy not in ("none", "data", "fsdp"):
            no(f"{p.strategy} with the example training scripts is not planned; use parallel = data or fsdp",
               "parallel")
    for arg in example_args(spec, target) if target.world_size > 1 else ():
        if SHELL_SPECIAL & set(arg.replace(RUN_DIR, "")):
            no(f"gaudi_spawn.py passes arguments to bash unescaped (it only double-quotes those "
               f"with spaces): {arg!r} would be changed by the shell", "script")
            break


def example_training_notes(spec: WorkloadSpec, target: TargetSpec) -> list[str]:
    clip = max_grad_norm(spec, target)
    out = [f"gradient clipping: max_grad_norm {clip}, " + (
        "the workload's grad_clip" if spec.origin_of(target.name, "optimizer.grad_clip") is not None
        else "GaudiTrainingArguments' default (the workload writes no grad_clip)")]
    if spec.dataset.kind == "hf" and dataset_config(spec):
        how = "the dataset's config" if spec.dataset.config else "accelctl's table of Hub configs"
        out.append(f"--dataset_config_name {dataset_config(spec)}: {spec.dataset.ref}'s config ({how})")
    if spec.task.kind == "pretrain":
        out.append(f"pre-training from {spec.model.ref}'s config with random weights (--config_name)")
    return out


def example_diffusion_notes(spec: WorkloadSpec, target: TargetSpec) -> list[str]:
    ms = spec.measure
    return [f"--gaudi_config_name {SD_GAUDI_CONFIG}: the Gaudi configuration seed 000 used, downloaded from the "
            "Hub with the model",
            f"{ms.warmup + ms.steps * ms.repeat} batches of {target.batch.micro} images; the pipeline leaves the "
            f"first {ms.warmup} out of its timing (--throughput_warmup_steps)"]

"""gaudi plans (seeds 000 and 003), and their check against the real optimum-habana.

The plan tests need nothing beyond the main venv.  The real-software tests run
``python -m accelctl.backends.gaudi.check`` inside ``.venv-habana`` (made by
``scripts/setup-habana.sh``) and skip, saying so, when it is absent.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import check, load, parse, plan
from accelctl.backends.gaudi import backend as gaudi
from accelctl.backends.gaudi import examples
from accelctl.backends.gaudi.backend import GaudiBackend, gaudi_config, spawned_prefix
from accelctl.backends.gaudi.check import SPAWN, Report, argparse_parser, check_argparse_script, spawn_join
from accelctl.contract.plan import Plan
from accelctl.errors import PlanError, WorkloadError
from accelctl.plan import registry
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
HABANA_PY = Path(os.environ.get("HABANA_VENV", ROOT / ".venv-habana")) / "bin" / "python"

# Seed 003 as the blog ran it: optimum-habana's run_generation.py with its own benchmark
# protocol (3 warm-up runs, 5 timed), BLOOMZ-176B over 8 Gaudi2 with DeepSpeed-inference.
SEED_003 = """
workload bloomz_176b {
  task generate {
    prompt         = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100 tokens
    decoding       = greedy
    kv_cache       = on
    batch_size     = 1
  }
  model hf("bigscience/bloomz") { stand_in = bloom(layers = 2, hidden = 64, heads = 4) }
  precision bf16
  measure { warmup = 3 steps  steps = 5 steps }
  target example { device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on
                   script = example }
  target worker  { device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on }
}
"""
#: seed 003's command, with the run's own master port (gaudi_spawn.py's default 29500 collides)
SEED_003_COMMAND = ("python ../gaudi_spawn.py --use_deepspeed --world_size 8 --master_port '{free_port}' "
                    "run_generation.py "
                    "--model_name_or_path bigscience/bloomz --use_hpu_graphs --use_kv_cache --max_new_tokens 100")

# BLOOMZ-7B on one card, plus a sampled variant the script must be told about
BLOOMZ_7B = """
workload bloomz_7b {
  task generate {
    prompt = "DeepSpeed is a machine learning framework"
    max_new_tokens = 100 tokens
    batch_size = 1
  }
  model hf("bigscience/bloomz-7b1")
  precision bf16
  measure { warmup = 3 steps  steps = 5 steps }
  target g2_1x     { device = gaudi2  devices = 1  hpu_graphs = on  script = example }
  target g1_1x     { device = gaudi   devices = 1  hpu_graphs = on }
  target g1_8x     { instance = dl1.24xlarge  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on  script = example }
  target g2_fp32   { device = gaudi2  devices = 1  precision = fp32  script = example }
  target eager     { device = gaudi2  devices = 1  lazy_mode = off }
  target tp4       { device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 4)  script = example }
  target no_ds     { device = gaudi2  devices = 8  script = example }
  target ds_fp32   { device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  precision = fp32
                     script = example }
  target graphs_eager { device = gaudi2  devices = 1  hpu_graphs = on  lazy_mode = off }
  target half      { device = gaudi2  devices = 1  precision = fp16 }
}
"""

SAMPLED = """
workload sampled {
  task generate { prompt = "Hello world" max_new_tokens = 50 tokens decoding = sample kv_cache = off batch_size = 4 }
  model hf("bigscience/bloomz-7b1")
  precision bf16
  measure { warmup = 2 steps  steps = 4 steps  repeat = 2 }
  seed = 7
  target one   { device = gaudi2  devices = 1  hpu_graphs = on  script = example }
  target eight { device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  script = example }
}
"""

QUOTED = """
workload quoted {
  task generate { prompt = "say \\"hi\\" for $5" max_new_tokens = 10 tokens }
  model hf("bigscience/bloomz-7b1")
  precision bf16
  target one   { device = gaudi2  devices = 1  script = example }
  target eight { device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  script = example }
}
"""

TLDR = """
workload tldr {
  task generate { max_new_tokens = 50 tokens }
  model hf("bigscience/bloomz-7b1")
  dataset hf("JulesBelveze/tldr_news") { column = "content"  prompt_tokens = 16 tokens }
  precision bf16
  measure { warmup = 3 steps  steps = 5 steps }
  target eight { device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on  script = example }
}
"""

# Seed 000-style training: GPT-2 fine-tuning with the language-modeling example, and
# accelctl's own loop on BERT (random init) and T5
TRAIN = """
workload clm {
  task finetune
  model hf("gpt2")
  dataset hf("wikitext")
  batch { micro = 4  accumulation = 2 }
  optimizer adamw { lr = 5e-5  grad_clip = 1.0 }
  precision bf16
  measure { warmup = 3 steps  steps = 10 steps }
  target ex8    { device = gaudi2  devices = 8  parallel = data  hpu_graphs = on  script = example }
  target ex1    { device = gaudi2  devices = 1  lazy_mode = off  gradient_checkpointing = on  script = example }
  target wk8    { device = gaudi2  devices = 8  parallel = data }
  target wk_fp32 { device = gaudi  devices = 1  precision = fp32 }
  target wk_fp8 { device = gaudi2  devices = 1  precision = fp8 }
  target graphs_eager { device = gaudi2  devices = 1  hpu_graphs = on  lazy_mode = off }
}
"""

BERT = """
workload bert_phase1 {
  task pretrain
  model bert(layers = 24, hidden = 1024, heads = 16)
  dataset hf("wikicorpus") { config = "raw_en" }
  batch { micro = 32 }
  optimizer sgd { lr = 0.01 }
  precision bf16
  target g2 { device = gaudi2  devices = 8  parallel = data }
  target ex { device = gaudi2  devices = 8  parallel = data  script = example }
}
"""

T5 = """
workload t5_3b {
  task finetune { objective = seq2seq }
  model hf("t5-3b")
  dataset hf("cnn_dailymail") { config = "3.0.0"  seq_len = 512 tokens  target_len = 128 tokens }
  batch { micro = 1 }
  optimizer adamw { lr = 1e-4 }
  target g2 { device = gaudi2  devices = 8  parallel = data  gradient_checkpointing = on  script = example }
}
"""


SD = """
workload sd {
  task infer { batch_size = 8  inference_steps = 50 steps }
  model hf("CompVis/stable-diffusion-v1-4")
  precision bf16
  measure { warmup = 2 steps  steps = 5 steps }
  target ex { device = gaudi2  devices = 1  hpu_graphs = on  script = example }
}
"""

BERT_HF = """
workload bert_hf {
  task pretrain
  model hf("bert-large-uncased")
  dataset hf("wikitext") { seq_len = 128 tokens }
  batch { micro = 32 }
  precision bf16
  target g2 { device = gaudi2  devices = 8  parallel = data  script = example }
}
"""

SUMMARIZATION = "examples/summarization/run_summarization.py"
TEXT_TO_IMAGE = "examples/stable-diffusion/text_to_image_generation.py"


@pytest.fixture(autouse=True)
def gaudi_registered(monkeypatch):
    """Plan through the real registry whether or not it lists the gaudi backend yet."""
    if "gaudi" not in registry.BACKENDS:
        monkeypatch.setitem(registry.BACKENDS, "gaudi", GaudiBackend())


WL_DIR = Path(".")


@pytest.fixture(scope="module", autouse=True)
def workload_dir(tmp_path_factory):
    """Where the test workloads live: local dataset files resolve against it."""
    global WL_DIR
    WL_DIR = tmp_path_factory.mktemp("workloads")
    (WL_DIR / "wiki.txt").write_text("a line of text\n", encoding="utf-8")
    return WL_DIR


def _spec(text: str):
    (spec,) = check(parse(text, str(WL_DIR / "gaudi.wl")))
    return spec


def _plan(text: str, target: str) -> Plan:
    return plan(_spec(text), target)


def _refusal(text: str, target: str) -> str:
    with pytest.raises(PlanError) as exc:
        _plan(text, target)
    return exc.value.render()


def _files(p: Plan) -> dict[str, str]:
    return {f.path: f.content for f in p.files}


# --------------------------------------------------------------------------- seed 003
def test_seed_003_plans_the_documented_command_exactly():
    p = _plan(SEED_003, "example")
    assert p.backend == "gaudi"
    (launch,) = p.launches
    assert shlex.join(launch.argv) == SEED_003_COMMAND
    assert launch.cwd == "{optimum_habana}/examples/text-generation"
    assert launch.processes == 8
    assert launch.env["PT_HPU_LAZY_MODE"] == "1"
    assert launch.env["PT_HPU_ENABLE_LAZY_COLLECTIVES"] == "true"
    assert "HF_HUB_OFFLINE" not in launch.env  # the example downloads bigscience/bloomz
    assert launch.shell().startswith("cd '{optimum_habana}/examples/text-generation' && ")
    assert launch.shell().endswith(SEED_003_COMMAND)
    assert p.files == ()  # run_generation.py takes no GaudiConfig
    assert ("gaudi_spawn.py runs: deepspeed --num_nodes 1 --num_gpus 8 --no_local_rank --master_port {free_port} "
            "run_generation.py ...") in p.notes


def test_seed_003_through_accelctls_worker():
    p = _plan(SEED_003, "worker")
    (launch,) = p.launches
    assert launch.argv == ("python", "gaudi_spawn.py", "--use_deepspeed", "--world_size", "8", "--master_port",
                           "{free_port}", "{run_dir}/accelctl_worker.py", "{run_dir}/job.json")
    assert launch.cwd == "{optimum_habana}/examples"
    # an accelerator target reaches the Hub by default (weights, configs, datasets by id)
    assert "HF_HUB_OFFLINE" not in launch.env and p.job.hub == "online" and p.job.device.comm == "hccl"
    assert launch.env["ACCELCTL_GAUDI_CONFIG"] == "{run_dir}/gaudi_config.json"
    files = _files(p)
    assert "runpy.run_module(\"accelctl.worker\", run_name=\"__main__\"" in files["accelctl_worker.py"]
    assert json.loads(files["gaudi_config.json"]) == {"use_torch_autocast": True, "use_fused_adam": False,
                                                      "use_fused_clip_norm": False}
    assert p.job.device.hpu_graphs is True and p.job.parallel.tp == 8


def test_plan_json_round_trip_keeps_the_working_directory():
    p = _plan(SEED_003, "example")
    again = Plan.from_dict(json.loads(p.to_json()))
    assert again.launches == p.launches


# --------------------------------------------------------------------------- run_generation flags
def test_one_card_runs_the_script_directly_with_bf16():
    (launch,) = _plan(BLOOMZ_7B, "g2_1x").launches
    assert shlex.join(launch.argv) == ("python run_generation.py --model_name_or_path bigscience/bloomz-7b1 "
                                       "--bf16 --use_hpu_graphs --use_kv_cache --max_new_tokens 100")
    assert "PT_HPU_ENABLE_LAZY_COLLECTIVES" not in launch.env


def test_what_the_script_does_not_do_by_itself_is_spelled_out():
    argv = _plan(SAMPLED, "one").launches[0].argv
    assert shlex.join(argv) == (
        "python run_generation.py --model_name_or_path bigscience/bloomz-7b1 --bf16 --use_hpu_graphs "
        "--max_new_tokens 50 --batch_size 4 --do_sample --seed 7 --prompt 'Hello world' --warmup 2 --n_iterations 8")
    assert "--use_kv_cache" not in argv  # kv_cache = off


def test_dataset_prompts_as_in_seed_003():
    argv = _plan(TLDR, "eight").launches[0].argv
    i = argv.index("run_generation.py")
    assert argv[i + 1:] == ("--model_name_or_path", "bigscience/bloomz-7b1", "--use_hpu_graphs", "--use_kv_cache",
                            "--max_new_tokens", "50", "--dataset_name", "JulesBelveze/tldr_news",
                            "--column_name", "content")  # 16 prompt tokens is the script's default


@pytest.mark.parametrize("text,target", [(SEED_003, "example"), (BLOOMZ_7B, "g2_1x"), (SAMPLED, "one"),
                                         (SAMPLED, "eight"), (TLDR, "eight"), (BLOOMZ_7B, "g1_8x")])
def test_every_generation_flag_exists_in_the_recorded_script(text, target):
    """run_generation.py's recorded argparse table parses what the plan passes (the full
    check, with optimum-habana installed, is test_plans_pass_the_real_optimum_habana)."""
    argv = list(_plan(text, target).launches[0].argv)
    args = argv[argv.index("run_generation.py") + 1:]
    rep = Report("t")
    check_argparse_script("examples/text-generation/run_generation.py", args, rep)
    assert not rep.errors, rep.errors


def test_gaudi_spawn_argv_parses_with_its_recorded_flags():
    argv = _plan(SEED_003, "example").launches[0].argv
    table = gaudi.flags_data()["scripts"][SPAWN]
    ns = argparse_parser(SPAWN, table).parse_args([a.replace("{free_port}", "40123") for a in argv[2:]])
    assert (ns.world_size, ns.use_deepspeed, ns.use_mpi, ns.master_port) == (8, True, False, 40123)
    assert ns.training_script == "run_generation.py"
    assert ns.training_script_args[:2] == ["--model_name_or_path", "bigscience/bloomz"]


def test_recorded_flags_name_their_source_commit():
    src = gaudi.flags_data()["source"]
    assert src["repository"] == "huggingface/optimum-habana"
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and src["package_version"] == "1.21.2"
    assert gaudi.flags_data()["scripts"]["examples/text-generation/run_generation.py"]["default_prompts"][0] == \
        "DeepSpeed is a machine learning framework"


def test_spawned_prefix_is_distributed_runners():
    # LAB §7: DistributedRunner(use_deepspeed=True, world_size=8)._interpreter
    assert " ".join(spawned_prefix(["--use_deepspeed", "--world_size", "8"])) == \
        "deepspeed --num_nodes 1 --num_gpus 8 --no_local_rank --master_port 29500"
    assert spawned_prefix(["--use_deepspeed", "--world_size", "8", "--master_port", "{free_port}"])[-2:] == \
        ["--master_port", "{free_port}"]
    assert spawned_prefix(["--world_size", "8"]) == ["python", "-um", "torch.distributed.run", "--nproc_per_node=8"]
    assert spawned_prefix(["--use_mpi", "--world_size", "8"])[:3] == ["mpirun", "-n", "8"]


def test_spawn_join_keeps_a_spaced_prompt_one_word():
    words = ["run_generation.py", "--prompt", "Hello world"]
    assert shlex.split(spawn_join(words)) == words


# --------------------------------------------------------------------------- environment, GaudiConfig
def test_lazy_mode_off_is_eager_in_the_environment():
    (launch,) = _plan(BLOOMZ_7B, "eager").launches
    assert launch.env["PT_HPU_LAZY_MODE"] == "0"
    assert launch.argv == ("python", "-m", "accelctl.worker", "{run_dir}/job.json")
    assert "OMP_NUM_THREADS" not in launch.env  # the planning host's cores say nothing about a Gaudi server


@pytest.mark.parametrize("target,expected", [
    ("wk8", {"use_torch_autocast": True, "use_fused_adam": True, "use_fused_clip_norm": True}),
    ("wk_fp32", {"use_torch_autocast": False, "use_fused_adam": True, "use_fused_clip_norm": True}),
    ("wk_fp8", {"use_torch_autocast": True, "use_fused_adam": True, "use_fused_clip_norm": True}),
])
def test_gaudi_config_per_precision(target, expected):
    spec = _spec(TRAIN)
    assert gaudi_config(spec, spec.target(target)) == expected
    if target == "wk_fp8":  # fp8 through the worker is refused at the precision (issue 23): no plan
        assert "fp8 on Gaudi is not built" in _refusal(TRAIN, target)
    else:
        assert json.loads(_files(_plan(TRAIN, target))["gaudi_config.json"]) == expected


def test_gaudi_config_without_clipping_or_adam():
    spec = _spec(BERT)
    assert gaudi_config(spec, spec.target("g2")) == {"use_torch_autocast": True, "use_fused_adam": False,
                                                     "use_fused_clip_norm": False}


def test_data_parallel_worker_uses_torch_distributed_through_gaudi_spawn():
    (launch,) = _plan(TRAIN, "wk8").launches
    assert launch.argv[:4] == ("python", "gaudi_spawn.py", "--world_size", "8")
    assert "PT_HPU_ENABLE_LAZY_COLLECTIVES" not in launch.env  # training: not set by the examples


# --------------------------------------------------------------------------- training examples
def test_run_clm_multi_card_follows_the_language_modeling_readme():
    p = _plan(TRAIN, "ex8")
    (launch,) = p.launches
    assert launch.cwd == "{optimum_habana}/examples/language-modeling"
    assert launch.argv[:8] == ("python", "../gaudi_spawn.py", "--use_mpi", "--world_size", "8", "--master_port",
                               "{free_port}", "run_clm.py")
    args = launch.argv[8:]
    for flag in ("--use_habana", "--use_lazy_mode", "--use_hpu_graphs_for_training", "--bf16", "--do_train"):
        assert flag in args
    assert args[args.index("--gaudi_config_name") + 1] == "{run_dir}/gaudi_config.json"
    assert args[args.index("--throughput_warmup_steps") + 1] == "3"
    assert args[args.index("--max_steps") + 1] == "13"
    assert args[args.index("--per_device_train_batch_size") + 1] == "4"
    assert args[args.index("--gradient_accumulation_steps") + 1] == "2"
    assert "gaudi_config.json" in _files(p)


def test_run_clm_eager_says_so():
    args = _plan(TRAIN, "ex1").launches[0].argv
    i = args.index("--use_lazy_mode")
    assert args[i + 1] == "False" and "--gradient_checkpointing" in args
    assert _plan(TRAIN, "ex1").launches[0].env["PT_HPU_LAZY_MODE"] == "0"


def test_t5_summarization_example():
    argv = _plan(T5, "g2").launches[0].argv
    assert "run_summarization.py" in argv and "--source_prefix" in argv
    assert argv[argv.index("--max_source_length") + 1] == "512"
    assert argv[argv.index("--max_target_length") + 1] == "128"


def test_t5_example_passes_the_datasets_config_and_the_scripts_clipping():
    """Seed 000's T5-3B ran examples/summarization, whose README loads cnn_dailymail with its
    config 3.0.0 (the dataset has no default config); the workload writes no grad_clip, so the
    Trainer's own clipping (max_grad_norm 1.0) applies, as in the seed's command: no
    --max_grad_norm 0.0, and the GaudiConfig fuses the clipping the Trainer will do."""
    p = _plan(T5, "g2")
    argv = p.launches[0].argv
    i = argv.index("--dataset_name")
    assert argv[i:i + 4] == ("--dataset_name", "cnn_dailymail", "--dataset_config_name", "3.0.0")
    assert "--max_grad_norm" not in argv
    assert "--text_column" not in argv  # "article" is the script's own column for cnn_dailymail
    assert examples.max_grad_norm(_spec(T5), _spec(T5).target("g2")) == 1.0
    assert json.loads(_files(p)["gaudi_config.json"])["use_fused_clip_norm"] is True
    assert "gradient clipping: max_grad_norm 1.0, GaudiTrainingArguments' default (the workload writes no " \
           "grad_clip)" in p.notes
    args = argv[argv.index("run_summarization.py") + 1:]
    flags = {f.lstrip("-") for f in args if f.startswith("--")}
    recorded = {row["name"] for rows in gaudi.flags_data()["scripts"][SUMMARIZATION]["dataclasses"].values()
                for row in rows}
    assert {"dataset_name", "dataset_config_name", "source_prefix"} <= recorded & flags


def test_t5_example_clipping_written_by_the_workload():
    off = _plan(T5.replace("adamw { lr = 1e-4 }", "adamw { lr = 1e-4  grad_clip = 0 }"), "g2")
    argv = off.launches[0].argv
    assert argv[argv.index("--max_grad_norm") + 1] == "0.0"  # asked for: no clipping
    assert json.loads(_files(off)["gaudi_config.json"])["use_fused_clip_norm"] is False
    half = _plan(T5.replace("adamw { lr = 1e-4 }", "adamw { lr = 1e-4  grad_clip = 0.5 }"), "g2").launches[0].argv
    assert half[half.index("--max_grad_norm") + 1] == "0.5"


def test_a_datasets_own_config_wins():
    """The dataset block's ``config`` is what the example script is given."""
    spec = _spec(T5.replace('config = "3.0.0"', 'config = "2.0.0"'))
    assert spec.dataset.config == "2.0.0"
    argv = plan(spec, "g2").launches[0].argv
    assert argv[argv.index("--dataset_config_name") + 1] == "2.0.0"


def test_t5_workloads_example_target_is_the_seeds_command():
    spec = next(s for s in load(ROOT / "workloads" / "t5_3b_summarization.wl"))
    p = plan(spec, "gaudi2_example")
    assert shlex.join(p.launches[0].argv) == (
        "python ../gaudi_spawn.py --use_mpi --world_size 8 --master_port '{free_port}' run_summarization.py "
        "--model_name_or_path t5-3b "
        "--dataset_name cnn_dailymail --dataset_config_name 3.0.0 --max_source_length 1024 --max_target_length 128 "
        "--source_prefix 'summarize: ' --per_device_train_batch_size 1 --learning_rate 5e-05 --max_steps 13 "
        "--throughput_warmup_steps 3 --do_train --output_dir '{run_dir}/output' --seed 0 --use_habana "
        "--gaudi_config_name '{run_dir}/gaudi_config.json' --use_lazy_mode --gradient_checkpointing")
    assert "fits" in p.notes[-1]  # batch 1, fp32 + checkpointing on 96 GB (seed 000)


# --------------------------------------------------------------------------- Stable Diffusion (seed 000)
def test_stable_diffusion_example_is_the_seeds_path():
    """Seed 000: "このスクリプトは、バッチサイズ8のサンプルで実行されました。使用されたのは
    Habana/stable-diffusion Gaudiの構成です" (batch 8, the Habana/stable-diffusion Gaudi
    configuration); the first 2 batches are discarded."""
    spec = next(s for s in load(ROOT / "workloads" / "stable_diffusion.wl"))
    p = plan(spec, "gaudi2_example")
    (launch,) = p.launches
    assert launch.cwd == "{optimum_habana}/examples/stable-diffusion"
    assert shlex.join(launch.argv) == (
        "python text_to_image_generation.py --model_name_or_path CompVis/stable-diffusion-v1-4 "
        "--num_images_per_prompt 56 --batch_size 8 --seed 0 --throughput_warmup_steps 2 "
        "--image_save_dir '{run_dir}/images' --use_habana --use_hpu_graphs "
        "--gaudi_config_name Habana/stable-diffusion --bf16")
    assert p.files == ()  # the Gaudi configuration is the Hub's Habana/stable-diffusion
    assert "HF_HUB_OFFLINE" not in launch.env
    # checked against the recorded flags: every flag exists, the values parse, and the Gaudi
    # configuration is the one the script itself defaults to
    rep = Report("t")
    check_argparse_script(TEXT_TO_IMAGE, list(launch.argv[2:]), rep)
    assert not rep.errors, rep.errors
    ns = argparse_parser(TEXT_TO_IMAGE, gaudi.flags_data()["scripts"][TEXT_TO_IMAGE]).parse_args(list(launch.argv[2:]))
    assert ns.gaudi_config_name == examples.script_defaults(TEXT_TO_IMAGE)["--gaudi_config_name"] == \
        "Habana/stable-diffusion"
    assert (ns.batch_size, ns.num_images_per_prompt // ns.batch_size, ns.throughput_warmup_steps) == (8, 7, 2)


def test_stable_diffusion_worker_path_names_the_seeds_gaudi_config():
    spec = next(s for s in load(ROOT / "workloads" / "stable_diffusion.wl"))
    p = plan(spec, "gaudi2")
    assert any("Habana/stable-diffusion" in n for n in p.notes)
    (cfg,) = [f for f in p.files if f.path == "gaudi_config.json"]
    assert "Habana/stable-diffusion" in cfg.role and json.loads(cfg.content)["use_torch_autocast"] is True


def test_stable_diffusion_example_on_several_cards_is_refused():
    text = SD.replace("devices = 1  hpu_graphs = on  script = example", "devices = 8  script = example")
    msg = _refusal(text, "ex")
    assert "E520" in msg and "splits the prompts between the processes" in msg


# --------------------------------------------------------------------------- BERT (seed 000)
def test_bert_example_from_synthetic_data_says_why_and_what_to_write():
    """Seed 000's BERT pre-training ran its own run_mlm.py on a pre-tokenized dataset: not an
    optimum-habana example; refused at the dataset line, saying what to write instead."""
    text = (ROOT / "workloads" / "bert_large_pretrain.wl").read_text(encoding="utf-8")
    text = text.replace("    dataloader_workers = 0\n  }\n  target gaudi2 {",
                        "    dataloader_workers = 0\n    script = example\n  }\n  target gaudi2 {", 1)
    assert "script = example" in text
    (spec, _) = check(parse(text, str(WL_DIR / "bert.wl")))
    with pytest.raises(PlanError) as exc:
        plan(spec, "gaudi1")
    (d,) = exc.value.diagnostics
    assert d.code == "E520" and d.span.line == text[:text.index("dataset synthetic")].count("\n") + 1
    for part in ("philschmid/processed_bert_dataset", "already tokenized", "dataset hf(\"wikitext\")",
                 "script = worker"):
        assert part in d.hint


def test_bert_example_with_a_text_dataset_pretrains_from_the_config():
    text = BERT_HF
    argv = _plan(text, "g2").launches[0].argv
    i = argv.index("run_mlm.py")
    assert argv[i + 1:i + 9] == ("--config_name", "bert-large-uncased", "--tokenizer_name", "bert-large-uncased",
                                 "--dataset_name", "wikitext", "--dataset_config_name", "wikitext-2-raw-v1")
    assert "--model_name_or_path" not in argv


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("text,target,reason", [
    (BLOOMZ_7B, "graphs_eager", "HPU graphs need lazy mode"),
    (TRAIN, "graphs_eager", "HPU graphs need lazy mode"),
    (BLOOMZ_7B, "half", "bf16"),
    (BLOOMZ_7B, "tp4", "sets the tensor-parallel size to the world size (8), not tp = 4"),
    (BLOOMZ_7B, "no_ds", "use parallel = deepspeed_inference(tp = 8)"),
    (BLOOMZ_7B, "ds_fp32", "always loads the model in bf16"),
    (BERT, "ex", "architecture-only model"),
    (QUOTED, "eight", "passes arguments to bash unescaped"),
])
def test_refusals_are_diagnostics(text, target, reason):
    msg = _refusal(text, target)
    assert "E520" in msg and reason in msg


def test_a_quoted_prompt_is_fine_on_one_card():
    argv = _plan(QUOTED, "one").launches[0].argv
    assert argv[argv.index("--prompt") + 1] == 'say "hi" for $5'


def test_fp8_on_gaudi1_is_refused_by_the_checker():
    text = BLOOMZ_7B.replace("target half      { device = gaudi2  devices = 1  precision = fp16 }",
                             "target g1_fp8 { device = gaudi  devices = 1  precision = fp8 }")
    with pytest.raises(WorkloadError) as exc:
        check(parse(text, "gaudi.wl"))
    assert "E501" in exc.value.render() and "fp8 is not available on gaudi" in exc.value.render()


def test_fp8_example_scripts_are_refused():
    text = TRAIN.replace("target wk_fp8 { device = gaudi2  devices = 1  precision = fp8 }",
                         "target wk_fp8 { device = gaudi2  devices = 1  precision = fp8  script = example }")
    assert "QUANT_CONFIG" in _refusal(text, "wk_fp8")


def test_hpu_options_on_other_devices_are_refused_by_the_checker():
    with pytest.raises(WorkloadError) as exc:
        check(parse(SEED_003.replace("device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  "
                                     "hpu_graphs = on\n", "device = a100  devices = 8  hpu_graphs = on\n"),
                    "gaudi.wl"))
    assert "E505" in exc.value.render()


def test_176b_on_gaudi1_does_not_fit():
    text = SEED_003.replace("device = gaudi2  devices = 8  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on\n"
                            "                   script = example",
                            "instance = dl1.24xlarge  parallel = deepspeed_inference(tp = 8)  hpu_graphs = on"
                            "  script = example")
    assert "does not fit" in _refusal(text, "example").lower()


def test_the_registry_lists_gaudi_once_registered():
    b = registry.BACKENDS["gaudi"]
    assert isinstance(b, GaudiBackend)
    spec = _spec(SEED_003)
    chosen, why = registry.choose(spec, spec.target("worker"))
    assert chosen is b and not why


MLM = """
workload bert_mlm {
  task pretrain
  model hf("bert-large-uncased")
  dataset files("wiki.txt") { seq_len = 128 tokens  mlm_probability = 0.2 }
  batch { micro = 32 }
  optimizer sgd { lr = 0.01  weight_decay = 0.01 }
  precision bf16
  target g2 { device = gaudi2  devices = 8  parallel = data  script = example }
}
"""

TLDR_32 = TLDR.replace("prompt_tokens = 16 tokens", "prompt_tokens = 32 tokens")


def test_run_mlm_with_local_files_and_sgd():
    argv = _plan(MLM, "g2").launches[0].argv
    assert "run_mlm.py" in argv
    for flag, value in (("--max_seq_length", "128"), ("--mlm_probability", "0.2"), ("--optim", "sgd"),
                        ("--weight_decay", "0.01")):
        assert argv[argv.index(flag) + 1] == value
    assert argv[argv.index("--train_file") + 1] == str((WL_DIR / "wiki.txt").resolve())


# --------------------------------------------------------------------------- the real optimum-habana
MATRIX = [(MLM, "g2"), (TLDR_32, "eight"), (SEED_003, "example"), (SEED_003, "worker"), (BLOOMZ_7B, "g2_1x"), (BLOOMZ_7B, "g1_1x"),
          (BLOOMZ_7B, "g1_8x"), (BLOOMZ_7B, "eager"), (SAMPLED, "one"), (SAMPLED, "eight"), (TLDR, "eight"),
          (TRAIN, "ex8"), (TRAIN, "ex1"), (TRAIN, "wk8"), (TRAIN, "wk_fp32"), (BERT, "g2"),
          (T5, "g2"), (T5.replace("adamw { lr = 1e-4 }", "adamw { lr = 1e-4  grad_clip = 0 }"), "g2"),
          (SD, "ex"), (BERT_HF, "g2")]


def _broken(p: Plan) -> dict[str, dict]:
    """Plans the real tools must reject, each made from a good one by one edit."""
    good = json.loads(p.to_json())
    out = {}
    d = json.loads(json.dumps(good))
    d["launches"][0]["argv"] = [a.replace("--use_hpu_graphs", "--use_hpu_graphz") for a in d["launches"][0]["argv"]]
    out["bad_flag"] = d
    d = json.loads(json.dumps(good))
    d["notes"] = [n.replace("--num_gpus 8", "--num_gpus 4") for n in d["notes"]]
    out["wrong_runner_note"] = d
    d = json.loads(json.dumps(good))
    d["launches"][0]["argv"] = [a for a in d["launches"][0]["argv"] if a != "--max_new_tokens"]
    out["dangling_value"] = d
    return out


def _broken_training(p: Plan) -> dict[str, dict]:
    good = json.loads(p.to_json())
    out = {}
    d = json.loads(json.dumps(good))
    for f in d["files"]:
        if f["path"] == "gaudi_config.json":
            f["content"] = json.dumps({**json.loads(f["content"]), "use_fused_adamw": True})
    out["unknown_config_key"] = d
    d = json.loads(json.dumps(good))
    d["launches"][0]["argv"] = list(d["launches"][0]["argv"]) + ["--use_hpu_graphs_for_training"]
    out["graphs_in_eager"] = d
    d = json.loads(json.dumps(good))
    d["launches"][0]["env"]["PT_HPU_LAZY_MODE"] = "1"
    out["eager_flag_lazy_env"] = d
    return out


@pytest.mark.skipif(not HABANA_PY.exists(), reason=f"optimum-habana venv not found at {HABANA_PY}: "
                    "run scripts/setup-habana.sh to check gaudi plans against the real optimum-habana")
def test_plans_pass_the_real_optimum_habana(tmp_path):
    paths = []
    for i, (text, target) in enumerate(MATRIX):
        p = _plan(text, target)
        path = tmp_path / f"good{i:02d}-{p.workload}-{target}.json"
        path.write_text(p.to_json())
        paths.append(path)
    broken = {**_broken(_plan(SEED_003, "example")), **_broken_training(_plan(TRAIN, "ex1"))}
    for name, d in broken.items():
        path = tmp_path / f"bad-{name}.json"
        path.write_text(json.dumps(d))
        paths.append(path)
    proc = subprocess.run([str(HABANA_PY), "-m", "accelctl.backends.gaudi.check", *map(str, paths)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    reports = {Path(r["plan"]).stem: r for r in map(json.loads, proc.stdout.splitlines())}
    assert len(reports) == len(paths), proc.stderr[-3000:]
    for name, rep in reports.items():
        if name.startswith("good"):
            assert rep["passed"], (name, rep["errors"])
            assert rep["optimum_habana"] == "1.21.2"
    # the example's clipping as the installed GaudiTrainingArguments reads the plan: its own
    # default when the workload writes no grad_clip, none when it writes 0
    t5 = [r for n, r in reports.items() if n.startswith("good") and "t5_3b-g2" in n]
    assert sorted(" ".join(r["ok"]).count("max_grad_norm=1.0") for r in t5) == [0, 1]
    assert any("max_grad_norm=0.0" in " ".join(r["ok"]) for r in t5)
    errors = {name[4:]: " | ".join(rep["errors"]) for name, rep in reports.items() if name.startswith("bad-")}
    assert "has no flag --use_hpu_graphz" in errors["bad_flag"]
    assert "DistributedRunner builds" in errors["wrong_runner_note"]
    assert "rejects its arguments" in errors["dangling_value"]
    assert "does not know use_fused_adamw" in errors["unknown_config_key"]
    # GaudiTrainingArguments' own rule, the one the plan's "HPU graphs need lazy mode" mirrors
    assert "cannot be used in eager mode" in errors["graphs_in_eager"]
    assert "needs PT_HPU_LAZY_MODE=0" in errors["eager_flag_lazy_env"]
    assert proc.returncode == 1  # the broken plans fail the run


def test_local_model_paths_are_absolute_for_the_example_folder(tmp_path):
    text = """
workload local_bloom {
  task generate { max_new_tokens = 20 tokens }
  model local("models/bloom") { shape = bloom(layers = 30, hidden = 4096, heads = 32)  stand_in = bloom(layers = 2, hidden = 64, heads = 4) }
  precision bf16
  target one { device = gaudi2  devices = 1  script = example }
}
"""
    (spec,) = check(parse(text, str(tmp_path / "w.wl")))
    (launch,) = plan(spec, "one").launches
    ref = launch.argv[launch.argv.index("--model_name_or_path") + 1]
    assert ref == str((tmp_path / "models" / "bloom").resolve())
    (offline,) = plan(spec, replace(spec.target("one"), options=replace(spec.target("one").options, hub="offline"))
                      ).launches
    assert offline.env["HF_HUB_OFFLINE"] == "1" and offline.env["HF_DATASETS_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in launch.env  # hub online, the default on an accelerator


def test_hpu_extras_read_the_plan_without_habana(tmp_path, monkeypatch):
    """The worker side imports nothing from Habana until a function needs it."""
    from accelctl.contract import envnames
    from accelctl.workload.types import OptimizerSpec
    from accelctl.worker import hpu_extras

    cfg = tmp_path / "gaudi_config.json"
    cfg.write_text(_files(_plan(TRAIN, "wk8"))["gaudi_config.json"])
    monkeypatch.setenv(envnames.GAUDI_CONFIG, str(cfg))
    config = hpu_extras.gaudi_config()
    assert config["use_fused_adam"] is True
    assert hpu_extras.fused_adamw([], OptimizerSpec(name="adamw"), config={}) is None
    assert hpu_extras.fused_adamw([], OptimizerSpec(name="sgd"), config) is None  # fused AdamW only
    assert hpu_extras.fused_clip([], 0.0, config) is None  # no clipping asked
    assert "habana_frameworks" not in sys.modules

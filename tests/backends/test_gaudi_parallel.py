"""parallel = fsdp on Gaudi: optimum-habana's GaudiTrainer FSDP in an example training script,
checked against the installed optimum-habana (what its GaudiTrainingArguments hands
accelerate), and the stack's own refusals (tensor/pipeline parallel, accelctl's worker)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from accelctl.api import check, parse, plan
from accelctl.errors import PlanError

ROOT = Path(__file__).resolve().parents[2]
HABANA_PY = Path(os.environ.get("HABANA_VENV", ROOT / ".venv-habana")) / "bin" / "python"
CONFIG = ROOT / "workloads" / "configs" / "Llama-2-7b-hf.json"

TEXT = f"""
workload llama_fsdp {{
  task finetune {{ objective = causal_lm }}
  model hf("meta-llama/Llama-2-7b-hf") {{ family = llama  config = "{CONFIG}" }}
  dataset hf("tatsu-lab/alpaca") {{ seq_len = 2048 tokens }}
  optimizer adamw(lr = 0.00002)
  precision bf16
  gradient_checkpointing = on
  batch {{ micro = 1 }}
  target full   {{ device = gaudi2  devices = 8  parallel = fsdp  script = example }}
  target grads  {{ device = gaudi2  devices = 8  parallel = fsdp(reshard_after_forward = off, offload = cpu)
                  script = example }}
  target worker {{ device = gaudi2  devices = 8  parallel = fsdp }}
  target lazy   {{ device = gaudi2  devices = 8  parallel = fsdp  script = example  lazy_mode = on }}
  target tp     {{ device = gaudi2  devices = 8  parallel = fsdp(tp = 2)  script = example }}
}}
"""


LLAMA_70B = ROOT / "workloads" / "configs" / "Llama-2-70b-hf.json"
GENERATE = f"""
workload tp_generate {{
  task generate {{ prompt = "DeepSpeed is a machine learning framework"  max_new_tokens = 100  batch_size = 1 }}
  model hf("meta-llama/Llama-2-70b-hf") {{ family = llama  config = "{LLAMA_70B}" }}
  precision bf16
  target tp     {{ device = gaudi2  devices = 8  parallel = tensor(tp = 8)  hpu_graphs = on  script = example }}
  target worker {{ device = gaudi2  devices = 8  parallel = tensor(tp = 8) }}
  target pp     {{ device = gaudi2  devices = 8  parallel = pipeline(pp = 2)  script = example }}
  target half   {{ device = gaudi2  devices = 8  parallel = tensor(tp = 4)  script = example }}
}}
"""


def _spec(text: str = TEXT):
    (spec,) = check(parse(text, "fsdp.wl"))
    return spec


def _refusal(target: str, text: str = TEXT) -> str:
    with pytest.raises(PlanError) as err:
        plan(_spec(text), target)
    (d,) = err.value.diagnostics
    assert d.code == "E520"
    return d.hint


def test_fsdp_runs_run_clm_eager_with_the_readmes_flags_and_config():
    p = plan(_spec(), "full")
    (launch,) = p.launches
    assert p.backend == "gaudi" and launch.argv[:5] == ("python", "../gaudi_spawn.py", "--use_mpi", "--world_size", "8")
    args = launch.argv
    assert args[args.index("--fsdp") + 1] == "full_shard auto_wrap"
    assert args[args.index("--fsdp_config") + 1] == "{run_dir}/fsdp_config.json"
    assert args[args.index("--use_lazy_mode") + 1] == "False" and launch.env["PT_HPU_LAZY_MODE"] == "0"
    assert args[args.index("--torch_compile_backend") + 1] == "hpu_backend" and "--torch_compile" in args
    assert "--gradient_checkpointing" not in args  # the config's activation_checkpointing instead
    cfg = json.loads(next(f.content for f in p.files if f.path == "fsdp_config.json"))
    assert cfg["transformer_layer_cls_to_wrap"] == "GaudiLlamaDecoderLayer"
    assert cfg["fsdp_activation_checkpointing"] is True and cfg["fsdp_offload_params"] is False
    notes = "\n".join(p.notes)
    assert "sharded over the 8 data-parallel ranks (1/8 each)" in notes
    assert "mesh pp" not in notes  # the worker's DeviceMesh is not what runs here


def test_fsdp_memory_shards_states_over_the_data_parallel_ranks_and_offload_keeps_one_block():
    full, grads = (next(n for n in plan(_spec(), t).notes if n.startswith("memory per device")) for t in
                   ("full", "grads"))
    # 6.74 B parameters: optimizer 12 B/param / 8 = 10.11 GB; lazy mode's 2x activations gone (eager)
    assert "optimizer 10.11 GB" in full and "2x" not in full
    assert "optimizer" not in grads and "gradients" not in grads  # offloaded to the host
    args = plan(_spec(), "grads").launches[0].argv
    assert args[args.index("--fsdp") + 1] == "shard_grad_op auto_wrap offload"


def test_what_optimum_habana_does_not_run_is_refused_at_its_line():
    assert "set script = example" in _refusal("worker")
    assert "eager mode with torch.compile" in _refusal("lazy")
    assert "takes no tensor-parallel degree" in _refusal("tp")


def test_tensor_parallel_generation_is_run_generations_own_tp():
    p = plan(_spec(GENERATE), "tp")
    (launch,) = p.launches
    assert launch.argv[:5] == ("python", "../gaudi_spawn.py", "--world_size", "8", "run_generation.py")
    assert launch.argv[launch.argv.index("--parallel_strategy") + 1] == "tp"
    assert "--use_deepspeed" not in launch.argv  # torch.distributed.run: setup_distributed_model_tp's hccl group
    fit = next(n for n in p.notes if n.startswith("memory per device"))
    assert "fits" in fit and "weights 18.16 GB" in fit  # 137.96 GB / 8 + the embeddings and head kept whole
    assert "accelctl's worker splits a model for generation with deepspeed_inference" in _refusal("worker", GENERATE)
    assert "no pipeline-parallel generation" in _refusal("pp", GENERATE)
    assert "splits the model over every process (8), not tp = 4" in _refusal("half", GENERATE)


@pytest.mark.skipif(not HABANA_PY.exists(), reason=f"optimum-habana venv not found at {HABANA_PY}: "
                    "run scripts/setup-habana.sh to check gaudi plans against the real optimum-habana")
def test_fsdp_plans_are_what_the_installed_gaudi_training_arguments_hand_accelerate(tmp_path):
    paths = []
    for target in ("full", "grads"):
        path = tmp_path / f"good-{target}.json"
        path.write_text(plan(_spec(), target).to_json())
        paths.append(path)
    (tmp_path / "good-tp.json").write_text(plan(_spec(GENERATE), "tp").to_json())
    paths.append(tmp_path / "good-tp.json")
    bad = json.loads(plan(_spec(), "full").to_json())
    for f in bad["files"]:
        if f["path"] == "fsdp_config.json":  # the launch still says full_shard: the config disagrees
            f["content"] = f["content"].replace('"fsdp_sharding_strategy": 1', '"fsdp_sharding_strategy": 2')
    (tmp_path / "bad-strategy.json").write_text(json.dumps(bad))
    paths.append(tmp_path / "bad-strategy.json")
    proc = subprocess.run([str(HABANA_PY), "-m", "accelctl.backends.gaudi.check", *map(str, paths)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    reports = {Path(r["plan"]).stem: r for r in map(json.loads, proc.stdout.splitlines())}
    assert len(reports) == 4, proc.stderr[-3000:]
    assert reports["good-tp"]["passed"], reports["good-tp"]["errors"]  # run_generation.py's flags, DistributedRunner
    assert reports["good-full"]["passed"], reports["good-full"]["errors"]
    assert "hands accelerate FSDP FULL_SHARD, wrapping GaudiLlamaDecoderLayer, offload False" in \
        " ".join(reports["good-full"]["ok"])
    assert "FSDP SHARD_GRAD_OP, wrapping GaudiLlamaDecoderLayer, offload True" in " ".join(reports["good-grads"]["ok"])
    assert "FSDP_SHARDING_STRATEGY='1', the plan means '2'" in " ".join(reports["bad-strategy"]["errors"])


@pytest.mark.skipif(not HABANA_PY.exists(), reason=f"optimum-habana venv not found at {HABANA_PY}")
def test_gaudi_training_arguments_have_no_tensor_or_pipeline_degree():
    """The refusal of tensor(tp)/pipeline(pp) on Gaudi rests on this: the installed class."""
    code = ("import dataclasses, json\nfrom accelctl.backends.gaudi.check import import_optimum_habana\n"
            "import_optimum_habana()\nfrom optimum.habana import GaudiTrainingArguments as A\n"
            "print(json.dumps([f.name for f in dataclasses.fields(A)]))")
    proc = subprocess.run([str(HABANA_PY), "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    fields = json.loads(proc.stdout.splitlines()[-1])
    assert "fsdp" in fields and "fsdp_config" in fields and "deepspeed" in fields
    assert not [f for f in fields if "tensor_parallel" in f or "pipeline_parallel" in f or f in ("tp_size", "pp_size")]

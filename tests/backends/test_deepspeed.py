"""deepspeed / deepspeed_inference plans, checked against DeepSpeed 0.19.8 itself, and real runs.

Three tiers:

* plan tests: no deepspeed needed (and planning must not import it);
* checks against the real tool (``accelctl.backends.deepspeed.check``): DeepSpeedConfig with a
  world-size shim, DeepSpeedInferenceConfig, the launcher's parser and resource
  resolution, fetch_hostfile; skipped where deepspeed is not installed;
* real runs on this CPU (``slow``): plan -> runner -> ``deepspeed`` launcher -> worker ->
  ``deepspeed.initialize`` / ``deepspeed.init_inference`` -> events.  No C++ op is
  JIT-built (the CPU plans keep deepspeed_shm_comm off and use the client optimizer):
  each test points ``TORCH_EXTENSIONS_DIR`` at an empty folder and checks it stays absent.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import check, parse, plan
from accelctl.backends.deepspeed import backend as B
from accelctl.backends.deepspeed import check as ds_check
from accelctl.backends.deepspeed import launch as L
from accelctl.backends.deepspeed.backend import DeepSpeedBackend, DeepSpeedInferenceBackend
from accelctl.backends.deepspeed.release import AUTOTP, AUTOTP_CLASS
from accelctl.contract.plan import GeneratedFile, Launch, Plan
from accelctl.errors import PlanError, attach_source
from accelctl.plan import registry
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]

# seed 001: BERT 1.5B (48 layers, hidden 1600, 25 heads) on 16 x dl1.24xlarge (8 Gaudi each),
# DeepSpeed ZeRO-1, bf16, micro-batch 16 x gradient accumulation 24, lr 0.003 on 16 nodes
SEED_001 = """
workload bert_1p5b {
  task pretrain { objective = mlm }
  model bert(layers = 48, hidden = 1600, heads = 25) {
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 128)
  precision bf16
  batch { micro = 16  accumulation = 24 }
  optimizer adamw { lr = 0.003 }
  measure { warmup = 1  steps = 3 }
  target dl1_16 {
    instance = dl1.24xlarge
    nodes    = 16
    parallel = zero(stage = 1)
  }
  target dl1_1 {
    instance = dl1.24xlarge
    parallel = zero(stage = 1)
  }
  target a100_offload {
    device   = a100
    devices  = 8
    parallel = zero(stage = 2, offload_optimizer = cpu)
  }
  target a100_z3 {
    device   = a100
    devices  = 8
    precision = fp16
    parallel = zero(stage = 3, offload_optimizer = cpu, offload_param = cpu)
  }
  target cpu2 {
    device    = cpu
    devices   = 2
    precision = fp32
    batch { micro = 2  accumulation = 2 }
    parallel  = zero(stage = 2)
  }
  target cpu_data {
    device    = cpu
    devices   = 2
    precision = fp32
    backend   = deepspeed
  }
}
"""

HOSTS = """
workload hosts {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  optimizer sgd { lr = 0.01  grad_clip = 0.5 }
  engine deepspeed { hosts = ["dl1-a", "dl1-b", "dl1-c"]  master_port = 29555  launcher = openmpi }
  target two  { instance = dl1.24xlarge  nodes = 2  parallel = zero(stage = 1) }
  target four { instance = dl1.24xlarge  nodes = 4  parallel = zero(stage = 1) }
}
"""

NO_SSH = """
workload no_ssh {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  engine deepspeed { hosts = ["localhost", "127.0.0.1"]  ssh = off  master_addr = "127.0.0.1" }
  target two_nodes { device = cpu  nodes = 2  devices = 1  parallel = zero(stage = 1) }
}
"""

LOCAL_HOST = """
workload one_host {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  engine deepspeed { hosts = ["localhost"] }
  target cpu2 { device = cpu  devices = 2  parallel = zero(stage = 0) }
}
"""

# seed 003: BLOOMZ greedy generation, DeepSpeed-inference tp = 8, plus what a CPU can run
INFERENCE = """
workload gen {
  task generate { prompt = "DeepSpeed is a machine learning framework"  max_new_tokens = 100 tokens  batch_size = 1 }
  model hf("bigscience/bloomz-7b1") { stand_in = bloom(layers = 2, hidden = 64, heads = 4) }
  precision bf16
  target a100_8x { device = a100  devices = 8  parallel = deepspeed_inference(tp = 8) }
  target a100_ki { device = a100  devices = 8  parallel = deepspeed_inference(tp = 8, kernel_inject = on) }
  target cpu_tp1 { device = cpu  devices = 1  precision = fp32  parallel = deepspeed_inference(tp = 1) }
  target cpu_tp2 { device = cpu  devices = 2  precision = fp32  parallel = deepspeed_inference(tp = 2) }
  target cpu_ki  { device = cpu  devices = 1  precision = fp32  parallel = deepspeed_inference(tp = 1, kernel_inject = on) }
}
"""


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """The DeepSpeed backends in the registry, after cpu and torchrun (a no-op once registered)."""
    for b in (DeepSpeedBackend(), DeepSpeedInferenceBackend()):
        if b.name not in registry.BACKENDS:
            monkeypatch.setitem(registry.BACKENDS, b.name, b)


def load(text: str, name: str = "ds.wl"):
    (spec,) = check(parse(text, name))
    return spec


def cfg_of(p: Plan, name: str = B.CONFIG_FILE) -> dict:
    return json.loads(next(f.content for f in p.files if f.path == name))


def file_of(p: Plan, name: str) -> str:
    return next(f.content for f in p.files if f.path == name)


def refusal(text: str, target: str) -> str:
    with pytest.raises(PlanError) as info:
        plan(load(text), target)
    (d,) = info.value.diagnostics
    assert d.code == "E520"
    return f"{d.message}: {d.hint}"


WORKER_TAIL = ("--module", "--no_local_rank", "accelctl.worker", "{run_dir}/job.json")


# ============================================================================ plans (no deepspeed)


def test_seed_001_ds_config_zero1_bf16_micro16_accum24_over_128():
    p = plan(load(SEED_001), "dl1_16")
    assert p.backend == "deepspeed" and p.device == "gaudi"
    assert cfg_of(p) == {
        "train_batch_size": 49152,  # 16 x 24 x (16 nodes x 8)
        "train_micro_batch_size_per_gpu": 16,
        "gradient_accumulation_steps": 24,
        "gradient_clipping": 0.0,  # written: DeepSpeed's default would be 1.0
        "zero_optimization": {"stage": 1},
        "steps_per_print": B.STEPS_PER_PRINT,
        "wall_clock_breakdown": False,
        "bf16": {"enabled": True},
    }
    (launch,) = p.launches
    assert launch.argv == ("deepspeed", "--hostfile", "{run_dir}/hostfile", "--num_nodes", "16", "--num_gpus", "8",
                           "--master_port", "29500", *WORKER_TAIL)
    assert launch.processes == 128
    assert launch.env["DS_ACCELERATOR"] == "hpu" and launch.env[B.CONFIG_ENV] == "{run_dir}/ds_config.json"
    assert file_of(p, "hostfile") == "".join(f"node{i} slots=8\n" for i in range(1, 17))
    assert any("placeholder hosts" in w for w in p.warnings)
    # the environment travels to the other nodes in DS_ENV_FILE
    assert launch.env["DS_ENV_FILE"] == "{run_dir}/deepspeed_env"
    assert "DS_ACCELERATOR=hpu\n" in file_of(p, "deepspeed_env")
    assert p.job.batch.micro == 16 and p.job.batch.accumulation == 24 and p.job.parallel.zero_stage == 1


def test_single_node_needs_no_hostfile():
    p = plan(load(SEED_001), "dl1_1")
    assert [f.path for f in p.files] == ["ds_config.json"]
    assert p.launches[0].argv == ("deepspeed", "--num_gpus", "8", "--master_port", "{free_port}", *WORKER_TAIL)
    assert cfg_of(p)["train_batch_size"] == 16 * 24 * 8


def test_cpu_plan_gloo_no_shm_comm_client_optimizer():
    p = plan(load(SEED_001), "cpu2")
    cfg = cfg_of(p)
    assert cfg["zero_optimization"] == {"stage": 2} and "optimizer" not in cfg
    assert "bf16" not in cfg and "fp16" not in cfg
    assert cfg["train_batch_size"] == 2 * 2 * 2
    (launch,) = p.launches
    # --num_gpus always: DeepSpeed's CPU accelerator counts NUMA nodes (1 without numactl)
    assert launch.argv == ("deepspeed", "--num_gpus", "2", "--master_port", "{free_port}", *WORKER_TAIL)
    assert launch.env["DS_ACCELERATOR"] == "cpu" and launch.env[L.SHM_ENV] == "0"
    assert any("process group gloo" in n for n in p.notes)


def test_forced_deepspeed_backend_on_data_parallel_is_zero_stage_0():
    p = plan(load(SEED_001), "cpu_data")
    assert p.backend == "deepspeed" and cfg_of(p)["zero_optimization"] == {"stage": 0}


def test_offload_uses_deepspeeds_cpu_adam_spelled_like_torch():
    cfg = cfg_of(plan(load(SEED_001), "a100_offload"))
    assert cfg["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    assert cfg["optimizer"] == {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.0}}
    adam = load(SEED_001.replace("optimizer adamw", "optimizer adam"))
    assert cfg_of(plan(adam, "a100_offload"))["optimizer"]["params"]["adam_w_mode"] is False
    z3 = cfg_of(plan(load(SEED_001), "a100_z3"))
    assert z3["fp16"] == {"enabled": True} and z3["zero_optimization"]["offload_param"] == {"device": "cpu"}


def test_sgd_under_zero_says_it_is_untested_and_clipping_is_carried():
    p = plan(load(HOSTS), "two")
    cfg = cfg_of(p)
    assert cfg["zero_allow_untested_optimizer"] is True and cfg["gradient_clipping"] == 0.5


def test_hosts_from_the_engine_block():
    p = plan(load(HOSTS), "two")
    assert file_of(p, "hostfile") == "dl1-a slots=8\ndl1-b slots=8\n"
    assert not p.warnings
    assert p.launches[0].argv == ("deepspeed", "--hostfile", "{run_dir}/hostfile", "--num_nodes", "2",
                                  "--num_gpus", "8", "--master_port", "29555", "--launcher", "openmpi",
                                  *WORKER_TAIL)


def test_fewer_hosts_than_nodes_is_a_positioned_plan_error():
    text = HOSTS
    with pytest.raises(PlanError) as info:
        plan(load(text), "four")
    (d,) = attach_source(info.value.diagnostics, text)
    assert d.code == "E545" and "needs 4 nodes" in d.message
    assert 'hosts = ["dl1-a"' in d.source_line and d.span.line == text.splitlines().index(d.source_line) + 1


def test_ssh_off_gives_one_launch_per_node():
    p = plan(load(NO_SSH), "two_nodes")
    assert [ln.name for ln in p.launches] == ["node0", "node1"]
    for i, ln in enumerate(p.launches):
        assert ln.argv[-7:] == ("--no_ssh", "--node_rank", str(i), *WORKER_TAIL)
        assert "--master_addr" in ln.argv and ln.processes == 1


def test_single_local_host_skips_the_ssh_check():
    p = plan(load(LOCAL_HOST), "cpu2")
    assert file_of(p, "hostfile") == "localhost slots=2\n"
    argv = p.launches[0].argv
    assert "--no_ssh_check" in argv and argv[argv.index("--master_addr") + 1] == "127.0.0.1"


def test_inference_plan_seed_003():
    p = plan(load(INFERENCE), "a100_8x")
    assert p.backend == "deepspeed_inference"
    assert cfg_of(p, B.INFERENCE_FILE) == {"tensor_parallel": {"tp_size": 8}, "dtype": "bf16",
                                           "replace_with_kernel_inject": False}
    (launch,) = p.launches
    assert launch.argv == ("deepspeed", "--num_gpus", "8", "--master_port", "{free_port}", *WORKER_TAIL)
    assert launch.env[B.INFERENCE_ENV] == "{run_dir}/ds_inference.json"
    assert p.job.parallel.tp == 8


def test_cpu_tp1_inference_plans():
    p = plan(load(INFERENCE), "cpu_tp1")
    assert cfg_of(p, B.INFERENCE_FILE)["dtype"] == "fp32" and p.launches[0].env[L.SHM_ENV] == "0"


def test_kernel_injection_on_cpu_is_refused_with_the_reason():
    why = refusal(INFERENCE, "cpu_ki")
    assert "kernel injection does not exist on CPU" in why and "InferenceBuilder" in why


@pytest.mark.skipif(not (B.installed_version("transformers") or "0").startswith("5."),
                    reason="the BLOOM refusals are about transformers 5.x")
def test_bloom_autotp_on_cpu_and_bloom_kernels_are_refused_naming_versions():
    why = refusal(INFERENCE, "cpu_tp2")
    assert "AutoTP of BLOOM fails with transformers 5." in why and "DeepSpeed 0.19" in why and "alibi" in why
    why = refusal(INFERENCE, "a100_ki")
    assert "transformers <= 4.43.4" in why
    # tp = 8 on GPUs without kernels is planned, with a warning (seen failing on CPU only)
    assert any("alibi" in w for w in plan(load(INFERENCE), "a100_8x").warnings)


def test_gpt2_autotp_is_refused_and_llama_is_planned():
    gpt2 = INFERENCE.replace('hf("bigscience/bloomz-7b1") { stand_in = bloom(layers = 2, hidden = 64, heads = 4) }',
                             "gpt2(layers = 2, hidden = 64, heads = 4)")
    assert "AutoTP cannot shard gpt2" in refusal(gpt2, "cpu_tp2")
    llama = gpt2.replace("gpt2(", "llama(")
    assert plan(load(llama), "cpu_tp2").backend == "deepspeed_inference"


def test_training_refusals():
    tp = SEED_001.replace("parallel  = zero(stage = 2)", "parallel  = zero(stage = 2, tp = 2)")
    assert "ZeRO data parallelism only" in refusal(tp, "cpu2")
    nvme = SEED_001.replace("offload_optimizer = cpu)", "offload_optimizer = nvme)")
    assert "nvme_path" in refusal(nvme, "a100_offload")
    sgd = SEED_001.replace("optimizer adamw", "optimizer sgd")
    assert "DeepSpeedCPUAdam" in refusal(sgd, "a100_offload")
    from accelctl.hostinfo import cpu_has_native_fp16

    if not cpu_has_native_fp16():
        fp16 = SEED_001.replace("precision = fp32\n    batch { micro = 2", "precision = fp16\n    batch { micro = 2")
        assert "is_fp16_supported" in refusal(fp16, "cpu2")


def test_plans_round_trip_through_json():
    for text, target in ((SEED_001, "dl1_16"), (NO_SSH, "two_nodes"), (INFERENCE, "a100_8x")):
        p = plan(load(text), target)
        assert Plan.from_dict(json.loads(p.to_json())) == p


def test_planning_imports_neither_torch_nor_deepspeed():
    code = (
        "import json, sys\n"
        "from accelctl.plan import registry\n"
        "from accelctl.backends.deepspeed.backend import DeepSpeedBackend, DeepSpeedInferenceBackend\n"
        "for b in (DeepSpeedBackend(), DeepSpeedInferenceBackend()):\n"
        "    registry.BACKENDS.setdefault(b.name, b)\n"
        "from accelctl.api import check, parse, plan\n"
        f"for text, t in (({SEED_001!r}, 'dl1_16'), ({INFERENCE!r}, 'a100_8x'), ({INFERENCE!r}, 'cpu_tp1')):\n"
        "    (spec,) = check(parse(text, 'x.wl'))\n"
        "    plan(spec, t)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepspeed', 'transformers'))))\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_the_pinned_releases_are_the_ones_pyproject_installs():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"transformers=={B.TRANSFORMERS_VERSION}"' in text and f'"deepspeed=={B.DEEPSPEED_VERSION}"' in text


def test_a_plan_for_another_machine_does_not_change_with_the_planning_machines_transformers(tmp_path):
    """With an older transformers installed (a real dist-info ahead on sys.path), the a100 plans
    stay byte-identical: they are written for the pinned release.  The host's cpu plan follows
    the installed one: BLOOM AutoTP on this CPU is no longer refused."""
    info = tmp_path / "transformers-4.40.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 4.40.0\n")
    code = (
        "import json\n"
        "from accelctl.api import check, parse, plan\n"
        "from accelctl.backends.deepspeed.backend import installed_version\n"
        "from accelctl.errors import PlanError\n"
        f"(spec,) = check(parse({INFERENCE!r}, 'x.wl'))\n"
        "out = {'installed': installed_version('transformers')}\n"
        "for t in ('a100_8x', 'a100_ki', 'cpu_tp2'):\n"
        "    try:\n"
        "        out[t] = plan(spec, t).to_json()\n"
        "    except PlanError as exc:\n"
        "        out[t] = exc.render()\n"
        "print(json.dumps(out))\n"
    )

    def run(pythonpath: str) -> dict:
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": pythonpath,
                              "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    here, older = run(str(ROOT)), run(f"{tmp_path}{os.pathsep}{ROOT}")
    assert older["installed"] == "4.40.0" and here["installed"] == B.installed_version("transformers")
    assert older["a100_8x"] == here["a100_8x"] and older["a100_ki"] == here["a100_ki"]
    if (here["installed"] or "0").startswith("5."):
        assert "transformers <= 4.43.4, and 5.23.0 is the release plans for other machines target" in here["a100_ki"]
        assert "AutoTP of BLOOM fails" in here["cpu_tp2"]
    assert '"backend": "deepspeed_inference"' in older["cpu_tp2"]  # the host's plan reads the host


# ============================================================================ against DeepSpeed itself



@pytest.fixture(scope="module")
def deepspeed():
    return pytest.importorskip("deepspeed")


ALL_PLANS = [(SEED_001, t) for t in ("dl1_16", "dl1_1", "a100_offload", "a100_z3", "cpu2", "cpu_data")] + [
    (HOSTS, "two"), (NO_SSH, "two_nodes"), (LOCAL_HOST, "cpu2"),
    (INFERENCE, "a100_8x"), (INFERENCE, "cpu_tp1"),
]


@pytest.mark.parametrize("text,target", ALL_PLANS, ids=[f"{t}" for _, t in ALL_PLANS])
def test_every_generated_plan_passes_deepspeed(deepspeed, text, target):
    spec = load(text)
    p = plan(spec, target)
    diags = ds_check.check_plan_with_deepspeed(p, spec)
    assert diags == [], "\n".join(d.render() for d in attach_source(diags, text))


def _seed_deepspeed_plans():
    """(path, spec, plan) of every target of workloads/*.wl that a DeepSpeed backend plans (engine local)."""
    out = []
    for path in sorted((ROOT / "workloads").glob("*.wl")):
        for spec in check(parse(path.read_text(encoding="utf-8"), str(path))):
            for t in spec.targets:
                try:
                    p = plan(spec, t, "local")
                except PlanError:
                    continue
                if p.backend in ds_check.BACKENDS:
                    out.append((path, spec, p))
    return out


def test_seed_workloads_deepspeed_plans_pass_deepspeed(deepspeed):
    plans = _seed_deepspeed_plans()
    names = {(path.name, p.target) for path, _, p in plans}
    assert ("bert_1_5b_zero1.wl", "dl1_16n") in names and ("bloomz.wl", "a100_8x_autotp") in names
    for path, spec, p in plans:
        diags = ds_check.check_plan_with_deepspeed(p, spec)
        assert diags == [], "\n".join(d.render() for d in attach_source(diags, path.read_text(encoding="utf-8")))
    (seed,) = [p for path, _, p in plans if (path.name, p.target) == ("bert_1_5b_zero1.wl", "dl1_16n")]
    cfg = cfg_of(seed)
    assert (cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"], cfg["train_batch_size"]) == \
        (16, 24, 49152)
    assert cfg["zero_optimization"] == {"stage": 1} and cfg["bf16"] == {"enabled": True}


def test_deepspeed_reads_every_top_level_key_we_write(deepspeed):
    known = ds_check.top_level_keys()
    assert {"train_batch_size", "zero_optimization", "bf16", "fp16", "gradient_clipping", "optimizer",
            "zero_allow_untested_optimizer", "steps_per_print", "wall_clock_breakdown"} <= known
    assert "zero_optimisation" not in known and "amp" not in known  # a typo; a removed feature


def test_deepspeed_config_accepts_a_typo_silently_so_we_check_top_level_keys(deepspeed):
    spec = load(SEED_001)
    target = spec.target("cpu2")
    cfg = B.ds_config(spec, target)
    cfg["zero_optimisation"] = cfg.pop("zero_optimization")
    parsed = ds_check.validate_ds_config(cfg, target.data_parallel)
    assert not isinstance(parsed, Exception)  # DeepSpeed itself: fine (and ZeRO is off)
    diags = attach_source(ds_check.check_ds_config(cfg, spec, target), SEED_001)
    typo = next(d for d in diags if d.code == "E541")
    assert "'zero_optimisation'" in typo.message and "zero_optimization" in typo.hint
    assert "parallel  = zero(stage = 2)" in typo.source_line
    # and what DeepSpeed then reads differs from the workload: stage 0, not 2
    assert any(d.code == "E540" and "reads zero_optimization = 0" in d.message for d in diags)


def _doctored(p: Plan, name: str, edit) -> Plan:
    cfg = cfg_of(p, name)
    edit(cfg)
    files = tuple(GeneratedFile(f.path, json.dumps(cfg), f.role) if f.path == name else f for f in p.files)
    return replace(p, files=files)


@pytest.mark.parametrize("edit,needle,line_has", [
    (lambda c: c["zero_optimization"].update(stage=5), "validation error for DeepSpeedZeroConfig", "parallel  = zero(stage = 2)"),
    (lambda c: c["zero_optimization"].update(overlap_comn=True), "Extra inputs are not permitted",
     "parallel  = zero(stage = 2)"),
    (lambda c: c.update(bf16={"enabled": True}, fp16={"enabled": True}), "cannot be simultaneously enabled",
     "precision = fp32"),
    (lambda c: c.update(train_batch_size=999), "train_batch_size is not equal", "batch { micro = 2"),
    (lambda c: c.update(train_micro_batch_size_per_gpu=-1), "has to be greater than 0", "batch { micro = 2"),
    (lambda c: c.pop("gradient_clipping"), "reads gradient_clipping = 1.0", "target cpu2 {"),
])
def test_what_deepspeed_rejects_is_reported_at_the_workload_line(deepspeed, edit, needle, line_has):
    spec = load(SEED_001)
    bad = _doctored(plan(spec, "cpu2"), B.CONFIG_FILE, edit)
    diags = attach_source(ds_check.check_plan_with_deepspeed(bad, spec), SEED_001)
    hit = [d for d in diags if d.code == "E540" and needle in d.message]
    assert hit, "\n".join(d.render() for d in diags)
    assert line_has in hit[0].source_line and hit[0].span is not None
    assert "DeepSpeed 0.19" in hit[0].message


def test_a_bad_inference_config_is_refused(deepspeed):
    spec = load(INFERENCE)
    bad = _doctored(plan(spec, "a100_8x"), B.INFERENCE_FILE, lambda c: c.update(tensor_paralel={"tp_size": 2}))
    (d,) = attach_source(ds_check.check_plan_with_deepspeed(bad, spec), INFERENCE)
    assert d.code == "E544" and "'tensor_paralel'" in d.message and "Extra inputs" in d.message


def test_every_generated_command_parses_with_the_launchers_parser(deepspeed):
    for text, target in ALL_PLANS:
        for launch in plan(load(text), target).launches:
            args, err = ds_check.parse_launcher(list(launch.argv[1:]))
            assert args is not None, err
            assert args.module and args.no_local_rank and args.user_script == "accelctl.worker"
            assert args.user_args == ["{run_dir}/job.json"]


def _with_launch(p: Plan, argv) -> Plan:
    return replace(p, launches=(Launch("deepspeed", tuple(argv), dict(p.launches[0].env)),))


def test_launcher_rejections_are_diagnostics(deepspeed):
    spec = load(SEED_001)
    p = plan(spec, "cpu2")
    argv = list(p.launches[0].argv)
    bad_int = argv.copy()
    bad_int[bad_int.index("--num_gpus") + 1] = "two"
    (d,) = ds_check.check_plan_with_deepspeed(_with_launch(p, bad_int), spec)
    assert d.code == "E542" and "invalid int value: 'two'" in d.message
    no_flag = [a for a in argv if a != "--no_local_rank"]
    (d,) = ds_check.check_plan_with_deepspeed(_with_launch(p, no_flag), spec)
    assert "--local_rank" in d.message
    more = argv.copy()
    more[more.index("--num_gpus") + 1] = "3"
    (d,) = ds_check.check_plan_with_deepspeed(_with_launch(p, more), spec)
    assert "would start 3 process(es)" in d.message and "devices   = 2" in attach_source([d], SEED_001)[0].source_line


def test_hostfile_is_read_by_fetch_hostfile(deepspeed):
    spec = load(SEED_001)
    p = plan(spec, "dl1_16")
    assert ds_check.read_hostfile(file_of(p, "hostfile")) == {f"node{i}": 8 for i in range(1, 17)}
    short = replace(p, files=tuple(
        GeneratedFile(f.path, "node1 slots=8\nnode2 slots=8\n") if f.path == "hostfile" else f for f in p.files))
    (d,) = ds_check.check_plan_with_deepspeed(short, spec)
    assert d.code == "E542" and "would start 16 process(es)" in d.message and "not the target's 16 x 8 = 128" in d.message
    broken = replace(p, files=tuple(
        GeneratedFile(f.path, "node1 slots=eight\n") if f.path == "hostfile" else f for f in p.files))
    (d,) = ds_check.check_plan_with_deepspeed(broken, spec)
    assert d.code == "E543" and "bad entry" in d.message


def test_single_host_hostfile_without_ssh_check_is_caught(deepspeed):
    spec = load(LOCAL_HOST)
    p = plan(spec, "cpu2")
    argv = [a for a in p.launches[0].argv if a != "--no_ssh_check"]
    diags = ds_check.check_plan_with_deepspeed(_with_launch(p, argv), spec)
    assert any("ssh" in d.message for d in diags)


def test_our_tables_agree_with_deepspeeds(deepspeed):
    import torch
    from deepspeed.module_inject.auto_tp import AutoTP
    from deepspeed.runtime.zero.utils import ZERO_SUPPORTED_OPTIMIZERS

    for family, cls in AUTOTP_CLASS.items():
        assert AutoTP.supported(cls) == AUTOTP[family], family
    client = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}
    assert {n for n, c in client.items() if c in ZERO_SUPPORTED_OPTIMIZERS} == set(B.ZERO_TESTED)
    from deepspeed.runtime.constants import GRADIENT_CLIPPING_DEFAULT

    assert GRADIENT_CLIPPING_DEFAULT == 1.0  # why ds_config always writes gradient_clipping


# ============================================================================ real runs on this CPU


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def run_plan(tmp_path, monkeypatch, deepspeed):
    """Plan -> runner -> events (the runner maps the ``deepspeed`` argv head to this venv)."""
    from accelctl.contract.events import read_events
    from accelctl.run.supervision import runner

    ext = tmp_path / "torch_extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(ext))

    def go(text: str, target: str):
        text = text.replace("PORT", str(_free_port()))
        spec = load(text)
        p = plan(spec, target)
        handle = runner.launch(p, source_text=text, spec_json=spec.to_json(), runs_root=tmp_path / "runs")
        result = handle.wait(timeout=600)
        log = (result.run_dir / "worker.log").read_text(errors="replace")
        assert result.status == "ok", log[-4000:]
        assert not ext.exists(), f"a C++ op was JIT-built: {list(ext.iterdir())}"
        return result, read_events(result.run_dir / "events.jsonl")

    return go


TINY_TRAIN = """
workload tiny_ds {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  batch { micro = 4  accumulation = 2 }
  optimizer adamw { lr = 0.001  grad_clip = 1.0 }
  measure { warmup = 1  steps = 3 }
  engine deepspeed { master_port = PORT }
  target zero2 { device = cpu  devices = 2  precision = fp32  parallel = zero(stage = 2) }
}
"""


@pytest.mark.slow
def test_real_zero2_training_two_ranks_through_the_deepspeed_launcher(run_plan):
    from accelctl.contract.events import RunFinished, RunStarted, StepMetrics

    result, events = run_plan(TINY_TRAIN, "zero2")
    started = [e for e in events if isinstance(e, RunStarted)]
    assert sorted(e.rank for e in started) == [0, 1] and all(e.world_size == 2 for e in started)
    engine = started[0].env["deepspeed_engine"]
    assert engine["zero_stage"] == 2 and engine["optimizer"] == "DeepSpeedZeroOptimizer"
    assert engine["basic_optimizer"] == "AdamW" and engine["shm_comm"] is False and engine["train_batch_size"] == 16
    steps = [e for e in events if isinstance(e, StepMetrics)]
    assert len(steps) == 2 * 4 and all(e.step_time_s > 0 and e.samples == 16 for e in steps)
    by_step = {}
    for e in steps:
        by_step.setdefault(e.step, set()).add(round(e.loss, 6))
    assert all(len(v) == 1 for v in by_step.values())  # both ranks log the same global loss
    finished = [e for e in events if isinstance(e, RunFinished)]
    assert len(finished) == 2 and finished[0].results["final_loss"] < finished[0].results["first_loss"]


TINY_GEN = """
workload tiny_gen {
  task generate { prompt = "DeepSpeed is a machine learning framework"  max_new_tokens = 8 tokens  batch_size = 1 }
  model llama(layers = 2, hidden = 64, heads = 4)
  precision fp32
  measure { warmup = 0  steps = 1 }
  engine deepspeed { master_port = PORT }
  target plain { device = cpu  devices = 1 }
  target tp2   { device = cpu  devices = 2  parallel = deepspeed_inference(tp = 2) }
}
"""


@pytest.mark.slow
def test_real_autotp_inference_gives_the_tokens_of_the_plain_model(run_plan):
    from accelctl.contract.events import RunFinished, RunStarted

    _, plain = run_plan(TINY_GEN, "plain")
    _, sharded = run_plan(TINY_GEN, "tp2")
    want = next(e for e in plain if isinstance(e, RunFinished)).results["sample_ids"]
    got = [e.results["sample_ids"] for e in sharded if isinstance(e, RunFinished)]
    assert got == [want, want]
    engine = next(e for e in sharded if isinstance(e, RunStarted)).env["deepspeed_engine"]
    assert engine["tp_size"] == 2 and engine["sharded_linears"] > 0 and engine["kernel_inject"] is False

"""A rehearsal is the target's plan, sized for this CPU (issue 23 item 3): what plan refuses is
refused the same way; the work per step is capped, and every cap is stated."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from accelctl import api
from accelctl.errors import PlanError
from accelctl.plan.rehearsal_size import SIZE, micro_cap, sized_for_this_cpu
from accelctl.plan.rehearse import rehearsal_target
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]

BIG = """
workload big {
  task finetune { objective = seq2seq  train_steps = 100000 steps }
  model hf("t5-3b") { stand_in = t5(layers = 2, hidden = 64, heads = 4) }
  dataset synthetic { seq_len = 1024 tokens  target_len = 128 tokens }
  batch { micro = 128  accumulation = 24 }
  measure { warmup = 10 steps  steps = 490 steps }
  target a100 { device = a100  devices = 8  parallel = zero(stage = 2) }
  target small { device = a100  devices = 1  micro_batch = 2  measure { warmup = 1 steps  steps = 4 steps } }
}
"""


def _spec(text: str):
    (spec,) = api.check(api.parse(textwrap.dedent(text), "big.wl"))
    return spec


@pytest.mark.parametrize("cores", [1, 2, 8])
def test_the_caps_and_the_line_that_states_them(cores):
    spec = _spec(BIG)
    target, rehearsal = rehearsal_target(spec, spec.target("a100"))
    s, t, r = sized_for_this_cpu(spec, target, rehearsal, cores=cores)
    micro = 2 * cores
    assert micro_cap(cores) == micro and (t.batch.micro, t.batch.accumulation) == (micro, SIZE["accumulation"])
    assert (s.dataset.seq_len, s.dataset.target_len) == (128, 32)
    assert (s.measure.warmup, s.measure.steps) == (2, 5)
    line = r.changes[-1]
    assert line == (f"sized for this CPU ({cores} cores): micro-batch 128 -> {micro}, accumulation 24 -> 2, "
                    "sequence length 1024 -> 128 tokens, target length 128 -> 32 tokens, warm-up steps 10 -> 2, "
                    "measured steps 490 -> 5")
    assert s.task.train_steps == 100000  # the target's job length is the target's, untouched


def test_a_target_already_small_is_left_as_written_and_its_own_measure_applies():
    spec = _spec(BIG)
    target, rehearsal = rehearsal_target(spec, spec.target("small"))
    s, t, r = sized_for_this_cpu(spec, target, rehearsal, cores=2)
    assert t.batch.micro == 2 and t.measure.steps == 4 and s.measure.steps == 490  # the workload's is not used
    assert "measured steps" not in r.changes[-1] and "micro-batch" not in r.changes[-1]


def test_generation_and_diffusion_caps():
    gen = _spec("""
    workload g {
      task generate { max_new_tokens = 100  batch_size = 1 }
      model hf("bigscience/bloomz-7b1") { stand_in = bloom(layers = 2, hidden = 64, heads = 4) }
      target a100 { device = a100  devices = 1 }
    }""")
    p = api.plan(gen, "a100", rehearse=True)
    assert p.job.task.max_new_tokens == 32 and "new tokens 100 -> 32" in p.notes[0]
    sd = api.load(ROOT / "workloads" / "stable_diffusion.wl")[0]
    real = api.plan(sd, "a100")
    p = api.plan(sd, "a100", rehearse=True)
    assert p.job.task.inference_steps == min(real.job.task.inference_steps, SIZE["inference_steps"])


REFUSED = {
    # BLOOM with DeepSpeed kernel injection on an A100: its container refuses transformers 5.x
    "kernel_inject": """
workload b {
  task generate { max_new_tokens = 8 }
  model hf("bigscience/bloom") { stand_in = bloom(layers = 2, hidden = 64, heads = 4) }
  target a100 { device = a100  devices = 8  parallel = deepspeed_inference(tp = 8, kernel_inject = on) }
}""",
    # Mistral-7B generation on inf2.48xlarge with tp = 8 (issue 23): optimum-neuron 0.4.5, which
    # plans Neuron generation, has no mistral decoder
    "inf2_tp8": """
workload m {
  task generate { max_new_tokens = 8 }
  model hf("mistralai/Mistral-7B-v0.1") {
    family = mistral
    shape = mistral(layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336, vocab = 32000)
  }
  target inf2 { instance = inf2.48xlarge  devices = 8  parallel = tensor(tp = 8) }
}""",
    # a model that does not fit (workloads/bloomz.wl's gaudi1)
    "no_fit": (ROOT / "workloads" / "bloomz.wl").read_text(encoding="utf-8"),
}


@pytest.mark.parametrize("case,target", [("kernel_inject", "a100"), ("inf2_tp8", "inf2"), ("no_fit", "gaudi1")])
def test_a_rehearsal_of_a_target_plan_refuses_is_refused_the_same_way(case, target):
    specs = api.check(api.parse(REFUSED[case], f"{case}.wl"))
    spec = next(s for s in specs if target in {t.name for t in s.targets} and s.name != "bloomz_7b")
    with pytest.raises(PlanError) as real:
        api.plan(spec, target)
    for device_path in (False, True):
        with pytest.raises(PlanError) as rehearsal:
            api.plan(spec, target, rehearse=True, device_path=device_path)
        assert rehearsal.value.diagnostics == real.value.diagnostics


def test_run_rehearse_of_a_refused_target_creates_no_run(tmp_path):
    wl = tmp_path / "ki.wl"
    wl.write_text(REFUSED["kernel_inject"], encoding="utf-8")
    runs = tmp_path / "runs"
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-t", "a100", "--rehearse",
                         "--headless", "--runs-dir", str(runs)], capture_output=True, text=True, timeout=120,
                        cwd=ROOT)
    plan = subprocess.run([sys.executable, "-m", "accelctl.cli", "plan", str(wl), "-t", "a100"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert cp.returncode == plan.returncode == 1, cp.stdout + cp.stderr
    assert "error[E520]" in cp.stderr and cp.stderr.strip().splitlines()[0] in plan.stderr
    assert not runs.exists() or not any(runs.iterdir())


def test_a_rehearsals_report_shows_no_target_job_time_nor_an_mfu_above_one(tmp_path, monkeypatch):
    from accelctl.report import entry as E

    record = _fake_rehearsal_record(tmp_path)
    monkeypatch.setattr(E, "steady_state", lambda events: _stats(mfu=3.2))
    entry = E.entry_from_run(record)
    assert entry.ran.startswith("REHEARSAL of a100") and entry.mfu is None
    assert entry.train_steps is None and entry.projected_hours is None and entry.projected_cost is None
    monkeypatch.setattr(E, "steady_state", lambda events: _stats(mfu=0.4))
    assert E.entry_from_run(record).mfu == pytest.approx(0.4)


def _stats(mfu: float):
    from accelctl.analysis.stats import steady_state

    real = steady_state([])

    return replace(real, mfu=type("M", (), {"mean": mfu})())


def _fake_rehearsal_record(tmp_path):
    spec = _spec(BIG)
    run = tmp_path / "r1"
    run.mkdir()
    (run / "spec.json").write_text(spec.to_json(), encoding="utf-8")

    class Record:
        id, workload, target, status, path, series, series_id = "r1", "big", "a100", "ok", run, {}, ""
        summary = {"what_ran": {"model": {"scale": "stand_in", "params": 1000},
                                "rehearsal": {"of": "a100", "device": "a100", "world_size": 8, "on": "this CPU"}},
                   "device": "cpu"}

        unreadable = False

        def events(self):
            return []

        def checked_events(self):
            return [], ""

    return Record()


# ------------------------------------------------------- item 4: refuse early what is not here


def test_run_of_a_target_whose_devices_this_machine_lacks_is_one_line_and_no_run_folder(tmp_path):
    from accelctl import exitcodes
    from accelctl.plan.select import missing_here

    runs = tmp_path / "runs"
    wl = ROOT / "workloads" / "bloomz.wl"
    spec = next(s for s in api.load(wl) if s.name == "bloomz_176b")
    if missing_here(spec, spec.target("a100_autotp")) is None:
        pytest.skip("this machine has CUDA devices: the a100 target runs here")
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", "bloomz_176b", "-t", "a100_autotp",
                         "--headless", "--runs-dir", str(runs)], capture_output=True, text=True, timeout=120,
                        cwd=ROOT)
    assert cp.returncode == exitcodes.NO_DEVICE == 4, cp.stdout + cp.stderr
    (line,) = [x for x in cp.stderr.splitlines() if x.strip()]
    assert "target a100_autotp needs 8 x a100 (cuda devices)" in line and "no cuda device" in line
    assert "`accelctl doctor`" in line and f"accelctl run {wl} -w bloomz_176b -t a100_autotp --rehearse" in line
    assert not runs.exists()


def test_missing_here_reads_the_devices_and_the_engine():
    from accelctl.plan.select import missing_here, runs_here

    spec = next(s for s in api.load(ROOT / "workloads" / "bloomz.wl") if s.name == "bloomz_176b")
    a100, cpu = spec.target("a100"), spec.target("cpu")
    assert missing_here(spec, a100, present={"cpu": "always"}) is not None
    assert missing_here(spec, a100, present={"cpu": "always", "cuda": "nvidia-smi"}) is None
    assert missing_here(spec, a100, "slurm", present={"cpu": "always"}) is None  # the cluster's nodes run it
    assert missing_here(spec, cpu, present={}) is None and runs_here(spec, cpu, {"cpu": "always"})
    assert not runs_here(spec, a100, {"cpu": "always"})


@pytest.mark.parametrize("native", [True, False])
def test_bf16_becomes_fp32_where_this_cpu_has_no_native_bf16(monkeypatch, native):
    from accelctl.plan import rehearse

    monkeypatch.setattr(rehearse, "cpu_has_native", lambda dtype: native)
    spec = next(s for s in api.load(ROOT / "workloads" / "bloomz.wl") if s.name == "bloomz_7b")
    p = api.plan(spec, "gaudi2_1x", rehearse=True)
    assert spec.target("gaudi2_1x").precision.dtype == "bf16"
    assert p.job.precision.dtype == ("bf16" if native else "fp32")
    assert ("bf16 -> fp32 (this CPU has no native bf16)" in p.notes[0]) is not native


def test_the_xla_rehearsal_needs_the_models_library_in_its_venv_else_the_plain_one_says_why(tmp_path, monkeypatch):
    """The schema walk found it: a bert trn1 target rehearsed through .venv-xla (torch-xla and
    timm, no transformers) failed at run time with ModuleNotFoundError."""
    from accelctl.backends.xla_neuron.cpu_rehearsal import READY_MARKER

    venv = tmp_path / "venv-xla"
    site = venv / "lib" / "python3.11" / "site-packages"
    for dist in ("torch_xla-2.9.0", "timm-1.0.31"):
        (site / f"{dist}.dist-info").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / READY_MARKER).write_text("")
    monkeypatch.setenv("XLA_VENV", str(venv))
    text = """
workload w {
  task pretrain {}
  model MODEL
  measure { warmup = 1 steps  steps = 2 steps }
  target trn { device = trn1  devices = 2 }
}"""
    bert = _spec(text.replace("MODEL", "bert(layers = 1, hidden = 32, heads = 2)"))
    p = api.plan(bert, "trn", rehearse=True, device_path=True)
    assert p.launches[0].name != "xla-cpu"
    assert any("transformers, which the model's family needs, is not installed" in w for w in p.warnings)
    vit = _spec(text.replace("MODEL", "vit(layers = 1, hidden = 32, heads = 2)"))
    assert api.plan(vit, "trn", rehearse=True, device_path=True).launches[0].name == "xla-cpu"

"""--rehearse: an accelerator target's plan moved onto this CPU with the stand-in, marked."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_hosts import REFERENCE

from accelctl import api
from accelctl.errors import PlanError
from accelctl.hostinfo import cpu_count
from accelctl.catalog import DEVICES
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
CASES = [(path.name, spec.name, t.name) for path in sorted((ROOT / "workloads").glob("*.wl"))
         for spec in api.load(path) for t in spec.targets if not DEVICES[t.device].host]


def _spec(file: str, workload: str):
    return next(s for s in api.load(ROOT / "workloads" / file) if s.name == workload)


@pytest.mark.parametrize("file,workload,target", CASES, ids=[":".join(c) for c in CASES])
def test_every_accelerator_target_rehearses_on_this_cpu_marked(file, workload, target):
    spec = _spec(file, workload)
    try:
        api.plan(spec, target)
    except PlanError as refused:  # what plan refuses is refused the same way, never rehearsed (issue 23)
        with pytest.raises(PlanError) as exc:
            api.plan(spec, target, rehearse=True)
        assert exc.value.diagnostics == refused.diagnostics
        return
    p = api.plan(spec, target, rehearse=True)
    assert p.target == target and p.rehearsal is not None and p.rehearsal.of == target
    assert p.rehearsal.device == spec.target(target).device
    assert DEVICES[p.device].host and p.backend in ("cpu", "torchrun", "deepspeed", "deepspeed_inference")
    assert p.job.scale == "stand_in" and p.job.rehearsal_of == target
    assert p.job.architecture == spec.model.stand_in and p.job.precision.dtype != "fp8"
    assert sum(launch.processes for launch in p.launches) <= max(1, cpu_count())
    assert p.notes[0].startswith(f"REHEARSAL of target {target}")


def test_the_same_target_without_rehearse_is_the_real_thing():
    spec = _spec("vit_fp8.wl", "vit_huge_fp8")
    real, rehearsal = api.plan(spec, "p5_fp8"), api.plan(spec, "p5_fp8", rehearse=True)
    assert real.rehearsal is None and real.job.scale == "real" and real.backend == "te_fp8"
    assert real.job.architecture["layers"] == 32 and rehearsal.job.architecture["layers"] == 2
    rb, b = real.job.batch, rehearsal.job.batch  # the micro-batch sized for this CPU, and said so
    assert b.micro == min(rb.micro, 2 * cpu_count()) and b.accumulation == rb.accumulation == 1
    assert rb.global_size == 1024
    if b.micro < rb.micro:
        assert f"micro-batch {rb.micro} -> {b.micro}" in rehearsal.notes[0]
    assert "fp8 -> fp32" in " ".join(rehearsal.rehearsal.changes)


def test_a_cpu_target_is_not_rehearsed_it_runs_as_it_is():
    spec = _spec("bloomz.wl", "bloomz_7b")
    p = api.plan(spec, "cpu", rehearse=True)
    assert p.rehearsal is None and p.job.scale == "stand_in" and not p.job.rehearsal_of


def test_rehearse_without_a_target_takes_the_first_accelerator_target():
    spec = _spec("vit_fp8.wl", "vit_huge_fp8")
    target, why = api.pick_rehearsal(spec)
    assert target.name == spec.targets[0].name and "first accelerator target" in why
    (cpu_only,) = api.check(api.parse("workload w { task pretrain {}  model gpt2(layers = 1, hidden = 32, heads = 2)"
                                      "  target cpu { devices = 1 } }", "w.wl"))
    with pytest.raises(PlanError, match="no accelerator target to rehearse"):
        api.pick_rehearsal(cpu_only)


WEIGHTS = """workload w {
  task pretrain {}
  model hf("bert-large-uncased") {
    weights  = real
    stand_in = bert(layers = 1, hidden = 32, heads = 2)
  }
  target cpu  { devices = 1 }
  target a100 { device = a100  devices = 1 }
}
"""


def test_real_weights_that_cannot_be_had_here_are_an_error_before_launch(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))  # an empty cache
    (spec,) = api.check(api.parse(WEIGHTS, str(tmp_path / "w.wl")))
    with pytest.raises(PlanError) as err:
        api.plan(spec, "cpu")
    (d,) = err.value.diagnostics
    assert d.code == "E531" and d.span.line == 4 and "bert-large-uncased" in d.message
    # another machine's cache is its own: the plan says where the weights must come from
    p = api.plan(spec, "a100")
    assert any("bert-large-uncased from the Hugging Face Hub" in n for n in p.notes)
    # a rehearsal never loads real weights
    assert api.plan(spec, "a100", rehearse=True).rehearsal is not None


TENSOR = """
workload tpr {
  task pretrain { }
  model llama(layers = 2, hidden = 64, heads = 4, ffn = 96, vocab = 256)
  dataset synthetic { seq_len = 64 }
  target fsdp_tp { device = h100  devices = 8  parallel = fsdp(tp = 4, sequence_parallel = on) }
  target tp     { device = h100  devices = 2  parallel = tensor(tp = 2) }
  target pp     { device = h100  devices = 2  parallel = pipeline(pp = 2) }
}
"""


@pytest.mark.parametrize("cores,tp,world,change", [
    (8, 4, 8, None),
    (3, 2, 2, "tensor parallel tp 4 -> 2 (the stand-in's 4 heads over this machine's 3 processes); "
              "3 processes -> 2 (whole tp groups of 2)"),
    (1, 1, 1, "tensor parallel (tp 4) -> 1: no tp of 2 or more divides the stand-in's 4 heads and 4 key/value "
              "heads and fits this machine's 1 processes"),
])
def test_tensor_parallel_rehearses_on_gloo_ranks_at_a_tp_the_stand_in_and_the_cores_take(cores, tp, world, change,
                                                                                      monkeypatch):
    host = replace(REFERENCE, cores=cores)  # the plan's host facts (accelctl.contract.hostfacts)
    (spec,) = api.check(api.parse(TENSOR, "tpr.wl"))
    p = api.plan(spec, "fsdp_tp", rehearse=True, host=host)
    assert p.rehearsal.of == "fsdp_tp" and p.notes[0].startswith("REHEARSAL of target fsdp_tp")
    assert (p.job.parallel.strategy, p.job.parallel.tp, p.job.strategy) == ("fsdp", tp, "sharded")
    assert p.job.parallel.sequence_parallel == (tp > 1)
    assert sum(launch.processes for launch in p.launches) == world
    if change:
        assert change in p.notes[0]
    if tp > 1:
        assert f"mesh pp 1 × dp {world // tp} × tp {tp} = {world} ranks" in "\n".join(p.notes)
    # the pipeline target keeps its 2 stages where 2 processes run (test_pipeline_... below)
    assert api.plan(spec, "pp", rehearse=True, host=host).job.parallel.pp == (2 if cores >= 2 else 1)
    if cores >= 2:
        assert api.plan(spec, "tp", rehearse=True, host=host).job.parallel.tp == 2


def test_a_vit_rehearsal_drops_sequence_parallel_where_the_stand_in_s_tokens_do_not_divide(monkeypatch):
    """The target's ViT has 9 patches + the class token (tp 2 divides 10: valid); its stand-in,
    16 + 1 = 17: the rehearsal keeps tensor parallel and turns sequence parallel off, saying why."""
    (spec,) = api.check(api.parse(
        "workload v {\n  task pretrain { objective = classification }\n"
        "  model vit(layers = 2, hidden = 64, heads = 4, image_size = 24, patch = 8) {\n"
        "    stand_in = vit(layers = 2, hidden = 64, heads = 4, image_size = 32, patch = 8) }\n"
        "  dataset synthetic(image_size = 24, classes = 10)\n"
        "  target h { device = h100  devices = 2  parallel = tensor(tp = 2, sequence_parallel = on) }\n}\n", "v.wl"))
    host = replace(REFERENCE, cores=2)  # the plan's host facts (accelctl.contract.hostfacts)
    p = api.plan(spec, "h", rehearse=True, host=host)
    assert p.job.parallel.tp == 2 and not p.job.parallel.sequence_parallel
    assert ("sequence parallel off: the rehearsal's 17 positions (16 patches + the class token) do not divide by "
            "tp 2") in p.notes[0]


PIPELINE = """
workload ppr {
  task pretrain { }
  model llama(layers = 8, hidden = 64, heads = 4, ffn = 96, vocab = 256) {
    stand_in = llama(layers = 3, hidden = 64, heads = 4, ffn = 96, vocab = 256)
  }
  dataset synthetic { seq_len = 64 }
  batch { micro = 2  accumulation = 4 }
  target gpipe { device = h100  devices = 8  parallel = pipeline(pp = 4) }
  target ofob  { device = h100  devices = 8  parallel = pipeline(pp = 4, schedule = one_f_one_b) }
}
"""
SCHEDULES = {"gpipe": "gpipe", "ofob": "one_f_one_b"}


@pytest.mark.parametrize("target,cores,pp,world,change", [
    ("gpipe", 8, 3, 6, "pipeline parallel pp 4 -> 3 (the stand-in's 3 layers; schedule gpipe kept); "
                       "8 processes -> 6 (whole pipelines of 3 stages)"),
    ("gpipe", 3, 3, 3, "pipeline parallel pp 4 -> 3 (this machine's 3 processes and the stand-in's 3 layers; "
                       "schedule gpipe kept)"),
    ("gpipe", 2, 2, 2, "pipeline parallel pp 4 -> 2 (this machine's 2 processes; schedule gpipe kept)"),
    ("gpipe", 1, 1, 1, "pipeline parallel (pp 4) -> 1: no 2 stages fit this machine's 1 processes; "
                       "schedule gpipe dropped"),
    ("ofob", 8, 2, 8, "pipeline parallel pp 4 -> 2 (one_f_one_b's micro-batch per stage in flight (the "
                      "rehearsal's accumulation 2); schedule one_f_one_b kept)"),
])
def test_pipeline_parallel_rehearses_on_gloo_ranks_at_a_pp_the_stand_in_and_the_cores_take(
        target, cores, pp, world, change, monkeypatch):
    host = replace(REFERENCE, cores=cores)  # the plan's host facts (accelctl.contract.hostfacts)
    (spec,) = api.check(api.parse(PIPELINE, "ppr.wl"))
    p = api.plan(spec, target, rehearse=True, host=host)
    assert p.rehearsal.of == target and change in p.notes[0], p.notes[0]
    assert p.job.parallel.pp == pp and sum(launch.processes for launch in p.launches) == world
    if pp > 1:  # the target's schedule, on a mesh of whole pipelines
        assert (p.job.parallel.strategy, p.job.parallel.schedule) == ("pipeline", SCHEDULES[target])
        notes = "\n".join(p.notes)
        assert f"mesh pp {pp} × dp {world // pp} × tp 1 = {world} ranks" in notes
        assert f"rank {world // pp * (pp - 1)}: pp {pp - 1}: layers 2-2 + head" in notes  # 3 layers: the last alone
    else:
        assert p.job.parallel.strategy == "none" and p.job.parallel.pp == 1

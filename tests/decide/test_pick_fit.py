"""``accelctl pick`` (every target x instance x layout at equal work, by deadline or budget) and
``accelctl fit`` (the largest micro-batch by the memory model; ``--probe`` for real on this CPU).

The answers are checked against the tool's own model: each pick row's job time is the work
over the estimate's throughput (samples, not optimizer steps), the ranking holds the rule it
states, and fit's micro-batch is the largest whose memory estimate fits while the next does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelctl.cli import main
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
BERT = str(ROOT / "workloads" / "bert_1_5b_zero1.wl")
T5 = str(ROOT / "workloads" / "t5_3b_summarization.wl")
VIT = str(ROOT / "workloads" / "vit_fp8.wl")


def _pick(capsys, *args) -> tuple[int, dict]:
    code = main(["pick", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_pick_cheapest_by_the_deadline_at_equal_samples(capsys):
    code, doc = _pick(capsys, BERT, "-w", "bert_1_5b_zero1_8n", "--work", "1e8 samples", "--deadline", "24 h")
    assert code == 0, doc
    picks = doc["result"]["picks"]
    assert picks and all(p["job_hours"] <= 24 for p in picks)
    assert [p["job_usd"] for p in picks] == sorted(p["job_usd"] for p in picks)  # cheapest first
    for p in picks:  # equal work: 1e8 samples at each row's throughput, whatever its global batch
        assert p["job_hours"] == pytest.approx(1e8 / p["throughput"] / 3600, rel=1e-9)
        assert p["job_usd"] == pytest.approx(p["job_hours"] * p["price_per_hour"], rel=1e-9)
        glob = int(p["batch"].rsplit("= ", 1)[1])
        assert p["steps"] == round(1e8 / glob)
        assert p["bound_by"] and p["why"]
    assert doc["result"]["assumptions"] and doc["result"]["rule"].startswith("cheapest first")
    # the same job on 8 nodes at the same micro-batch does 8x fewer optimizer steps than on 1 node
    one = [p for p in picks if p["devices"].startswith("1 x ")]
    eight = [p for p in picks if p["devices"].startswith("8 x ") and p["instance"] == one[0]["instance"]
             and p["layout"] == one[0]["layout"] and p["micro"] == one[0]["micro"]] if one else []
    if one and eight:
        assert one[0]["steps"] == 8 * eight[0]["steps"]


def test_pick_within_budget_is_fastest_first(capsys):
    code, doc = _pick(capsys, BERT, "-w", "bert_1_5b_zero1_8n", "--work", "1e8 samples", "--budget", "1100 usd")
    assert code == 0
    picks = doc["result"]["picks"]
    assert picks and all(p["job_usd"] <= 1100 for p in picks)
    assert [p["job_hours"] for p in picks] == sorted(p["job_hours"] for p in picks)


def test_pick_steps_count_at_the_reference_global_batch(capsys):
    code, doc = _pick(capsys, BERT, "-w", "bert_1_5b_zero1_8n", "--work", "1000 steps")
    assert code == 0
    # dl1_1n (the first accelerator target): micro 16 x accumulation 24 x 8 devices = 3072 per step
    assert all(p["job_hours"] == pytest.approx(3072e3 / p["throughput"] / 3600, rel=1e-9)
               for p in doc["result"]["picks"])


def test_pick_nothing_meets_an_impossible_deadline(capsys):
    code, doc = _pick(capsys, BERT, "-w", "bert_1_5b_zero1_8n", "--work", "1e12 samples", "--deadline", "1 h")
    assert code == 1 and doc["result"]["picks"] == []


@pytest.mark.parametrize("args", [["--work", "5 GB"], ["--work", "1e8 samples", "--deadline", "3 usd"],
                                  ["--work", "lots"]])
def test_pick_bad_input_is_a_positioned_error(args, capsys):
    code = main(["pick", BERT, "-w", "bert_1_5b_zero1_8n", *args])
    err = capsys.readouterr().err
    assert code == 1 and "error[E232]" in err and "Traceback" not in err


def test_fit_t5_3b_on_gaudi2_is_micro_batch_1(capsys):
    """Seed 000: batch > 1 does not fit Gaudi2 (the lazy-mode graph of the first iteration)."""
    from accelctl.api import load
    from accelctl.plan import memory

    code = main(["fit", T5, "-t", "gaudi2", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    v = doc["result"]["variants"][0]
    assert (v["name"], v["largest_micro"]) == ("as written", 1)
    (spec,) = load(T5)
    t = spec.target("gaudi2")
    at = [memory.estimate(spec, replace(t, batch=replace(t.batch, micro=m, global_size=None)))
          for m in (1, 2)]
    assert at[0].fits and not at[1].fits
    assert v["total_bytes"] == at[0].total and v["above_bytes"] == at[1].total


def test_fit_is_the_boundary_of_the_memory_model(capsys):
    from accelctl.api import load
    from accelctl.plan import memory

    main(["fit", VIT, "-t", "p5_bf16", "--json"])
    doc = json.loads(capsys.readouterr().out)
    (spec,) = load(VIT)
    t = spec.target("p5_bf16")
    for v in doc["result"]["variants"]:
        assert v["total_bytes"] <= t.memory_bytes < v["above_bytes"]
    by = {v["name"]: v["largest_micro"] for v in doc["result"]["variants"]}
    assert by["gradient checkpointing on"] > by["as written"]  # what checkpointing buys, by the model
    assert memory.estimate(spec, replace(t, batch=replace(
        t.batch, micro=by["as written"], global_size=None))).fits


def test_fit_probe_is_not_run_without_the_device(capsys):
    code = main(["fit", T5, "-t", "gaudi2", "--probe"])
    out = capsys.readouterr().out
    assert code == 4
    assert "probe: NOT RUN: this machine has no gaudi2 device" in out


def _fit_vit(tmp_path) -> Path:
    """The scaling test's tiny ViT, at 64 x 64 images and hidden 128 (enough memory per sample
    for a cap to bite), one process, 1 GB."""
    text = (Path(__file__).parent / "fixtures" / "tiny_sweep.wl").read_text()
    text = (text.replace("layers = 1, hidden = 32, heads = 2, image_size = 16", "layers = 2, hidden = 128, heads = 4, "
                         "image_size = 64").replace("synthetic(image_size = 16", "synthetic(image_size = 64")
            .replace("devices  = 2\n    parallel = ddp", "devices  = 1\n    memory   = 1 GB"))
    assert "image_size = 64" in text and "memory   = 1 GB" in text
    wl = tmp_path / "fitvit.wl"
    wl.write_text(text)
    return wl


@pytest.mark.slow
def test_fit_probe_runs_real_steps_and_catches_out_of_memory(tmp_path):
    """One step uncapped runs and reports its memory; the same step capped below what it needs
    ends in an out-of-memory failure that the probe names (never a traceback, never a pass)."""
    from accelctl.decide.fit_probe import one_step

    wl = _fit_vit(tmp_path)
    status, held = one_step(str(wl), "tiny_sweep", "cpu", 1, 0, str(tmp_path / "runs"))
    assert status == "ok" and held and held > 0
    status, _ = one_step(str(wl), "tiny_sweep", "cpu", 700, held + 200 * 2**20, str(tmp_path / "runs"))
    assert status.startswith("out of memory:"), status


def _llama7b_without_checkpointing(tmp_path) -> Path:
    """llama2_7b.wl with gradient checkpointing off at micro-batch 12: every layer's activations
    of 12 sequences of 2,048 tokens."""
    import shutil

    shutil.copytree(ROOT / "workloads" / "configs", tmp_path / "configs")
    text = (ROOT / "workloads" / "llama2_7b.wl").read_text()
    assert text.count("gradient_checkpointing = on") == 1 and text.count("batch { micro = 4 }") == 1
    wl = tmp_path / "llama2_7b.wl"
    wl.write_text(text.replace("gradient_checkpointing = on", "gradient_checkpointing = off")
                  .replace("batch { micro = 4 }", "batch { micro = 12 }"))
    return wl


def test_pick_offers_tensor_parallel_where_fsdp_does_not_fit(tmp_path, capsys):
    """Llama-2-7B at 2,048 tokens without checkpointing: FSDP alone at micro-batch 12 does not
    fit one p5.48xlarge by the memory model; FSDP x TP divides the
    activations by tp, so pick's own fit of each candidate gives fsdp(tp = 4) a larger micro-batch
    than fsdp alone on the same machine (and every row it ranks was planned: the compiler's
    verdict, no rule of pick's own)."""
    from accelctl.api import load_selected
    from accelctl.plan import memory
    from accelctl.workload.types import ParallelSpec

    wl = _llama7b_without_checkpointing(tmp_path)
    code, doc = _pick(capsys, str(wl), "-w", "llama2_7b_zero3", "--work", "1e6 samples", "--top", "500")
    assert code == 0, doc
    picks = doc["result"]["picks"]
    p5 = {p["layout"]: p for p in picks if p["instance"] == "p5.48xlarge" and p["devices"].startswith("1 x ")}
    assert "fsdp tp4" in p5 and "fsdp" in p5, sorted(p5)
    assert p5["fsdp tp4"]["micro"] > p5["fsdp"]["micro"]
    (spec,) = load_selected(str(wl), "llama2_7b_zero3")
    h100 = spec.target("h100")
    one_node = replace(h100, nodes=1)
    fsdp = replace(one_node, parallel=ParallelSpec(strategy="fsdp"))
    fsdp_tp = replace(one_node, parallel=ParallelSpec(strategy="fsdp", tp=4))
    assert not memory.estimate(spec, fsdp).fits and memory.estimate(spec, fsdp_tp).fits


def test_pick_candidates_include_tensor_and_pipeline_layouts():
    from accelctl.api import load_selected
    from accelctl.decide.pick import candidates

    (spec,) = load_selected(str(ROOT / "workloads" / "llama2_70b.wl"), "llama2_70b_finetune")
    layouts = [c for c in candidates(spec) if c.startswith("parallel=")][0]
    for want in ("tensor(tp = 8)", "pipeline(pp = 4)", "fsdp(tp = 8)", "fsdp"):
        assert want in layouts


def test_the_probe_measures_the_data_segment_its_cap_counts():
    """The probe's cap is RLIMIT_DATA (each process's data segment), so the runtime it adds to the
    cap is measured the same way: the largest VmData of any process under it, caught while it
    runs (a 300 MB buffer held for a moment), never the resident memory left at the end."""
    import subprocess
    import sys

    from accelctl.decide.fit_probe import DataSegmentWatch

    with DataSegmentWatch() as watch:
        subprocess.run([sys.executable, "-c", "import time; b = bytearray(300 * 2**20); time.sleep(0.5)"], check=True)
    assert watch.peak >= 300 * 2**20


@pytest.mark.parametrize("largest,micro", [(487, 611), (611, 611), (1, 40), (900, 611)])
def test_the_probe_bisects_to_the_largest_micro_batch_that_runs(largest, micro):
    """``boundary`` against a step that runs out of memory above ``largest``: it brackets the
    largest that runs within a sixteenth of the model's answer, or confirms the answer."""
    from accelctl.decide.fit_probe import MOST_PROBES, boundary

    calls = []

    def step(m: int) -> str:
        calls.append(m)
        return "ok" if m <= largest else "out of memory: MemoryError"

    out = boundary(step, micro)
    assert len(calls) == len(set(calls)) <= MOST_PROBES + 1
    if largest >= micro:  # confirmed, and the next size tried
        assert out[micro] == "ok" and set(out) == {micro, micro + 1}
    else:
        ran = max(m for m, r in out.items() if r == "ok")
        oom = min(m for m, r in out.items() if r != "ok")
        assert ran <= largest < oom and oom - ran <= max(1, micro // 16)

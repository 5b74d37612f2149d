"""``--set KEY=VALUE`` (accelctl.language.settings): a setting written into the workload's text at
the parser's spans, meaning exactly what the setting applied to the AST means; what a run keeps
and what --resume compares are that edited text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import load_selected_source, plan
from accelctl.cli import main
from accelctl.dsl.parser import read_source
from accelctl.errors import WorkloadError
from accelctl.run.supervision.resume import check_workload_unchanged
from accelctl.language import settings

ROOT = Path(__file__).resolve().parents[2]
GPT2 = ROOT / "workloads" / "tiny_gpt2.wl"
LLAMA = ROOT / "workloads" / "llama2_7b.wl"
VIT = ROOT / "workloads" / "vit_fp8.wl"


def edited(path: Path, *sets: str) -> str:
    return settings.applied(str(path), read_source(path), settings.parse_sets(list(sets)))


def test_a_setting_is_an_edit_of_the_text_that_parses_to_the_same_workloads():
    text = edited(GPT2, "batch.micro=2", "precision=bf16", "measure.steps=3 steps")
    # target keys: written in every target block (precision as a target writes it, with "=")
    assert "micro = 2" in text and "precision = bf16" in text and "steps = 3 steps" in text
    original = read_source(GPT2)
    # no line added above the end: a diagnostic's line in the edited text is the file's
    assert text.splitlines()[:len(original.splitlines())][0] == original.splitlines()[0]
    assert len(text.splitlines()) == len(original.splitlines()) + 4  # the note, then one line per setting
    assert settings.recorded(text) == ["batch.micro=2", "precision=bf16", "measure.steps=3 steps"]
    _, (train, gen) = load_selected_source(GPT2, sets=["batch.micro=2", "precision=bf16"])
    assert train.target("cpu").batch.micro == 2 and train.target("cpu").precision.dtype == "bf16"
    assert gen.target("cpu").precision.dtype == "bf16"


def test_nested_target_and_instance_settings():
    _, (zero3,) = load_selected_source(LLAMA, "llama2_7b_zero3", ["parallel.stage=2"])
    assert zero3.target("h100").parallel.zero_stage == 2  # only targets that write parallel take it
    assert zero3.target("cpu").parallel.strategy != "zero"
    _, (spec,) = load_selected_source(LLAMA, "llama2_7b_zero3", ["instance=p4de.24xlarge"])
    h100 = spec.target("h100")
    assert h100.device == "a100" and h100.instance == "p4de.24xlarge"
    assert plan(spec, "h100").device == "a100"
    # one target's setting; its written global batch (1024 = 128 x 8) is dropped with the device count
    _, specs = load_selected_source(VIT, None, ["target.p5_te.devices=4"])
    te = next(s for s in specs if any(t.name == "p5_te" for t in s.targets)).target("p5_te")
    assert te.devices == 4 and te.batch.global_size in (None, te.batch.micro * te.batch.accumulation * 4)


def test_one_targets_instance_drops_its_device_as_sweep_over_does():
    """``target.NAME.instance=X`` on a target that writes ``device`` and ``devices``: the instance
    brings its own (as ``--over target.NAME.instance=`` and ``--set instance=`` do), so the edit
    drops them from that block rather than refusing the setting (E232)."""
    _, (spec,) = load_selected_source(LLAMA, "llama2_7b_zero3", ["target.gaudi2.instance=p5.48xlarge"])
    t = spec.target("gaudi2")
    assert (t.instance, t.device, t.devices) == ("p5.48xlarge", "h100", 8)
    assert spec.target("trn1").instance == "trn1.32xlarge"  # the other targets keep theirs
    assert plan(spec, "gaudi2").device == "h100"


def test_a_bad_value_is_reported_once_in_its_argument(capsys):
    with pytest.raises(WorkloadError) as exc:
        edited(LLAMA, "batch.micro=0")
    (d,) = exc.value.diagnostics  # two workloads took it: one report
    assert d.path == "--set batch.micro=0" and d.code == "E304" and d.span.column == 13
    assert main(["validate", str(GPT2), "--set", "batch.micro=0"]) == 1
    assert "--set batch.micro=0:1:13: error[E304]" in capsys.readouterr().err
    for bad in ("batch.micro=2,4", "micro", "=3"):
        with pytest.raises(WorkloadError) as exc:
            settings.parse_sets([bad])
        assert exc.value.diagnostics[0].code == "E231" and exc.value.diagnostics[0].path == f"--set {bad}"


def test_plan_and_estimate_take_the_setting(capsys):
    assert main(["plan", str(GPT2), "-w", "tiny_gpt2_train", "--set", "micro=4", "--json"]) == 0
    job = json.loads(capsys.readouterr().out)["result"]["plans"][0]["plan"]["job"]
    assert job["batch"]["micro"] == 4
    assert main(["estimate", str(LLAMA), "-w", "llama2_7b_zero3", "-t", "h100", "--set", "micro=2", "--json"]) == 0
    (one,) = json.loads(capsys.readouterr().out)["result"]["estimates"]
    assert main(["estimate", str(LLAMA), "-w", "llama2_7b_zero3", "-t", "h100", "--json"]) == 0
    (base,) = json.loads(capsys.readouterr().out)["result"]["estimates"]
    assert one["step_time_s"] < base["step_time_s"]  # half the micro-batch, about half the step


@pytest.mark.parametrize("chosen,setting,other", [
    ("tiny_gpt2_train", "optimizer.lr=0.1", "tiny_gpt2_generate"),
    ("tiny_gpt2_train", "optimizer.weight_decay=0.0", "tiny_gpt2_generate"),
    ("tiny_gpt2_generate", "task.max_new_tokens=8 tokens", "tiny_gpt2_train")])
def test_with_w_a_setting_is_written_into_that_workload_alone(chosen, setting, other, capsys):
    """``-w NAME --set KEY=VALUE``: the key is the chosen workload's; another workload of the file,
    to which it may not even apply (an optimizer for a generate task), keeps its text."""
    text, specs = load_selected_source(GPT2, chosen, [setting])
    assert [s.name for s in specs] == [chosen]
    source = read_source(GPT2)
    text = text.split("\n# (accelctl: the settings below", 1)[0] + "\n"  # the settings recorded at the end

    def block(t: str, name: str) -> str:
        return t.split(f"workload {name} {{", 1)[1].split("\nworkload ", 1)[0]
    assert block(text, other) == block(source, other) and block(text, chosen) != block(source, chosen)
    assert main(["plan", str(GPT2), "-w", chosen, "--set", setting, "--json"]) == 0
    assert main(["estimate", str(GPT2), "-w", chosen, "--set", setting, "--json"]) == 0
    capsys.readouterr()


def test_resume_writes_the_recorded_settings_into_the_file_before_comparing(tmp_path):
    wl = tmp_path / "w.wl"
    wl.write_text(read_source(GPT2))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "workload.wl").write_text(edited(wl, "batch.micro=2"))
    check_workload_unchanged(run_dir, wl)  # the file as it was: the same text once the setting is in
    wl.write_text(read_source(GPT2).replace("lr = 0.001", "lr = 0.002"))
    with pytest.raises(Exception, match="changed since the run started"):
        check_workload_unchanged(run_dir, wl)


@pytest.mark.slow
def test_a_run_keeps_the_edited_file(tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(GPT2), "-w", "tiny_gpt2_train", "-t",
                           "cpu", "--headless", "--runs-dir", str(runs), "--set", "batch.micro=2",
                           "--set", "measure.steps=3 steps"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    stored = (run_dir / "workload.wl").read_text()
    assert "micro = 2" in stored and settings.recorded(stored) == ["batch.micro=2", "measure.steps=3 steps"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["details"]["micro_batch"] == 2 and summary["stats"]["step_time"]["count"] == 3

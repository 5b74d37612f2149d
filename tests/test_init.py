"""``accelctl init``: every file it writes validates, its targets plan (sharded where they must be)
or say in plan's words why not, and it refuses what it cannot know (accelctl.cli.init)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import exitcodes
from accelctl.api import plan, validate
from accelctl.cli import build_parser
from accelctl.errors import AccelctlError, PlanError
from accelctl.models.catalog import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
LLAMA_CONFIG = ROOT / "workloads" / "configs" / "Llama-2-7b-hf.json"


def init(tmp_path: Path, *argv: str) -> Path:
    out = tmp_path / "w.wl"
    args = build_parser().parse_args(["init", *argv, "-o", str(out), "--force"])
    assert args.fn(args) == exitcodes.OK
    return out


def errors_of(path: Path) -> list:
    specs, diags = validate(path)
    assert specs, diags
    return [d for d in diags if d.severity == "error"]


@pytest.mark.parametrize("family,task", [(f, t) for f, fam in FAMILIES.items() for t in fam.tasks
                                         if not fam.from_module])  # that one is read from a config.json
def test_every_family_and_task_validates_and_its_cpu_target_plans(tmp_path, family, task):
    path = init(tmp_path, family, "--task", task, "-t", "h100", "-t", "gaudi2")
    assert not errors_of(path), path.read_text()
    (spec,) = validate(path)[0]
    assert {t.name for t in spec.targets} == {"h100", "gaudi2", "cpu"}
    assert plan(spec, "cpu").launches  # runs here
    text = path.read_text()
    assert f"task {task}" in text and "# " in text and f"accelctl run {path} -t cpu" in text


def test_a_hub_model_with_its_config_plans_its_real_shape_sharded_to_fit(tmp_path):
    path = init(tmp_path, "meta-llama/Llama-2-7b-hf", "--config", str(LLAMA_CONFIG), "-t", "p5.48xlarge",
                "-t", "gaudi2")
    text = path.read_text()
    assert f'config = "{LLAMA_CONFIG}"' in text and "family = llama" in text
    assert not errors_of(path)
    (spec,) = validate(path)[0]
    h100 = plan(spec, "p5_48xlarge")
    # the real 6.74 B parameters: 13.48 GB of bf16 weights, FSDP over 8 GPUs -> 1.68 GB of gradients each
    assert any("memory per device (real model): weights 2.05 GB + gradients 1.68 GB" in n for n in h100.notes), \
        h100.notes
    # 6.74 B parameters with Adam states do not fit 8 H100s unsharded: the first fix E530 offers, FSDP
    assert "parallel = fsdp" in text and "sharded to fit (E530 as first written)" in text
    assert spec.target("gaudi2").world_size == 8


def test_a_target_that_cannot_run_says_why_in_plans_words(tmp_path):
    # T5-3B's Adam states alone (~48 GB) are three times a NeuronCore's 16 GB (ViT-H at micro-batch
    # 8 was refused by 0.3 GB until the memory model stopped counting dropout masks timm's ViT has not)
    path = init(tmp_path, "t5-3b", "-t", "trn1")
    (spec,) = validate(path)[0]
    with pytest.raises(PlanError) as refused:
        plan(spec, "trn1")
    code = refused.value.diagnostics[0].code
    assert f"accelctl plan refuses it: {code}" in path.read_text()
    assert not errors_of(path)  # a refusal is validate's warning, at the target's line


def test_a_config_next_to_the_file_is_named_relative_to_it(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(LLAMA_CONFIG.read_text())
    path = init(tmp_path, "someone/my-llama", "--config", str(tmp_path / "cfg"), "-t", "h100")
    assert 'config = "cfg/config.json"' in path.read_text() and not errors_of(path)


def test_what_it_cannot_know_is_a_usage_error_naming_the_way_out(tmp_path):
    parser = build_parser()
    for argv, words in ((["org/mystery"], "--family"),
                        (["org/some-llama-model", "-t", "h100"], "--config"),
                        (["llama", "-t", "h200x"], "not a device kind or an instance"),
                        (["vit", "--task", "generate"], "family vit does")):
        args = parser.parse_args(["init", *argv, "-o", str(tmp_path / "x.wl")])
        with pytest.raises(AccelctlError) as exc:
            args.fn(args)
        assert exc.value.exit_code == exitcodes.USAGE and words in str(exc.value), (argv, str(exc.value))
    assert not (tmp_path / "x.wl").exists()
    # a Hub id whose family its name gives, with the cpu target only: the stand-in runs here
    path = init(tmp_path, "org/some-llama-model")
    assert "family = llama" in path.read_text() and not errors_of(path)


def test_an_existing_file_is_kept_and_dash_prints_the_file(tmp_path):
    target = tmp_path / "keep.wl"
    target.write_text("mine")
    run = [sys.executable, "-m", "accelctl.cli", "init", "bert", "-o", str(target)]
    proc = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == exitcodes.USAGE and "--force" in proc.stderr and "Traceback" not in proc.stderr
    assert target.read_text() == "mine"
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", "init", "bert", "-o", "-"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"})
    assert proc.returncode == 0 and proc.stdout.startswith("# bert: pretrain") and "workload bert_pretrain" in proc.stdout
    assert not list(tmp_path.glob("*.wl")) or [p.name for p in tmp_path.glob("*.wl")] == ["keep.wl"]


@pytest.mark.slow
def test_the_written_workload_runs_here(tmp_path):
    path = init(tmp_path, "gpt2", "-t", "h100")
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(path), "-t", "cpu", "--headless",
                           "--runs-dir", str(tmp_path / "runs")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "status: ok" in proc.stdout


@pytest.mark.parametrize("name", ["llama-7b", 'my "odd" model \\ 2', "-dash"])
@pytest.mark.parametrize("how", ["relative", "absolute", "beside-the-file"])
def test_a_local_model_folder_is_written_as_local_and_validates(tmp_path, monkeypatch, capsys, name, how):
    """``init FOLDER`` writes ``model local("...")`` (the language's own, not a Hub id), the path
    a string of the language that reads back as the folder from the written file's place."""
    from accelctl.cli import main

    models, out = (tmp_path, tmp_path / "out") if how != "beside-the-file" else (tmp_path / "out", tmp_path / "out")
    folder = models / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(LLAMA_CONFIG.read_text())
    out.mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)
    given = str(folder) if how == "absolute" else os.path.relpath(folder, tmp_path)
    if given.startswith("-"):
        given = f"./{given}"
    path = init(out, given)
    text = path.read_text()
    assert "model local(" in text and "model hf(" not in text, text
    assert main(["validate", str(path)]) == exitcodes.OK, capsys.readouterr()
    (spec,) = validate(path)[0]
    assert (path.parent / spec.model.ref).resolve() == folder.resolve()
    assert spec.model.family == "llama" and spec.model.real_shape["hidden"] == 4096
    assert Path(spec.model.ref).is_absolute() == (how == "absolute")


@pytest.mark.parametrize("model", ["local", "family"])
@pytest.mark.parametrize("where, errname", [("missing/deeper", "ENOENT"), ("a_file", "ENOTDIR")])
def test_a_file_in_a_folder_that_is_not_there_is_refused_naming_it(tmp_path, monkeypatch, model, where, errname):
    """``init FOLDER -o missing/out.wl`` is the one line of a place that takes no file (exit 1,
    the path and its errno) -- never an E413 "model path does not exist" about a model folder
    that is there, the written path checked from a folder that is not -- and nothing is made."""
    from accelctl.report.exportpath import refusal

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(LLAMA_CONFIG.read_text())
    (tmp_path / "a_file").write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    out = f"{where}/out.wl"
    args = build_parser().parse_args(["init", "./m" if model == "local" else "llama", "-o", out])
    with pytest.raises(AccelctlError) as exc:
        args.fn(args)
    no = getattr(errno, errname)
    assert exc.value.exit_code == exitcodes.FAILED
    assert str(exc.value) == str(refusal("init", Path(out), OSError(no, os.strerror(no)), "write"))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_what_no_workload_can_name_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "line\nbreak").mkdir()
    (tmp_path / "line\nbreak" / "config.json").write_text(LLAMA_CONFIG.read_text())
    parser = build_parser()
    for ref, words in (("./nope", "no such model folder"), ("./a.json", "a file, not a model folder"),
                       ("./empty", "no config.json in this model folder"), ("foo bar", "not a family, a Hub id"),
                       ("./line\nbreak", "a control character (\\x0a)")):
        args = parser.parse_args(["init", ref, "-o", str(tmp_path / "x.wl")])
        with pytest.raises(AccelctlError) as exc:
            args.fn(args)
        assert exc.value.exit_code == exitcodes.USAGE and words in str(exc.value), (ref, str(exc.value))
        assert "\n" not in str(exc.value).replace(repr(ref)[1:-1], "")
    assert not (tmp_path / "x.wl").exists()


def test_a_trainium_instance_is_sharded_with_the_fix_plan_offers(tmp_path):
    """ZeRO-3 is not built on Trainium: the target init writes takes the first fix plan's refusal
    offers (each of them planned), here tensor parallel over 8 NeuronCores with ZeRO-1."""
    config = ROOT / "tests/data/hf_configs/Meta-Llama-3-8B.json"
    path = init(tmp_path, "meta-llama/Meta-Llama-3-8B", "--config", str(config), "-t", "trn1.32xlarge")
    text = path.read_text()
    assert "parallel = zero(stage = 1, tp = 8)" in text and "sharded to fit (E530 as first written)" in text
    (spec,) = validate(path)[0]
    plan(spec, "trn1_32xlarge")  # it plans as written

"""Gaudi example scripts take what they accept (issue 23 item 5): ``--train_file`` as the
scripts' own DataTrainingArguments check accepts it (a folder or JSON Lines converted at plan
time, else refused at the dataset line), and ``{optimum_habana}`` filled from
``OPTIMUM_HABANA_DIR`` in every format, or refused naming the variable."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from accelctl.api import load, plan, render_plan, validate
from accelctl.backends.gaudi.data_files import MAX_CONVERTED_BYTES
from accelctl.backends.gaudi.examples import flags_data
from accelctl.errors import PlanError
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
HABANA_PY = ROOT / ".venv-habana" / "bin" / "python"

WL = """
workload w {{
  task finetune {{ objective = {objective} }}
  model hf("{model}") {{ stand_in = {family}(layers = 2, hidden = 64, heads = 4)  shape = {family}(layers = 2, hidden = 64, heads = 4) }}
  dataset files("{data}") {{ seq_len = 64 tokens }}
  precision bf16
  target g2 {{ device = gaudi2  devices = 1  script = example }}
}}
"""


def _workload(tmp_path, data: str, objective: str = "causal_lm", model: str = "gpt2", family: str = "gpt2"):
    path = tmp_path / "w.wl"
    path.write_text(textwrap.dedent(WL.format(objective=objective, model=model, family=family, data=data)),
                    encoding="utf-8")
    return path


def _train_file(p) -> str:
    argv = p.launches[0].argv
    return argv[argv.index("--train_file") + 1]


def test_the_scripts_own_extension_checks_are_recorded_from_their_source():
    scripts = flags_data()["scripts"]
    assert scripts["examples/language-modeling/run_clm.py"]["file_extensions"]["train_file"] == ["csv", "json", "txt"]
    assert scripts["examples/language-modeling/run_mlm.py"]["file_extensions"]["train_file"] == ["csv", "json", "txt"]
    assert scripts["examples/summarization/run_summarization.py"]["file_extensions"]["train_file"] == ["csv", "json"]


def test_a_folder_of_text_files_becomes_one_train_txt_of_the_run_folder(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("first line\nsecond", encoding="utf-8")
    (tmp_path / "corpus" / "b.txt").write_text("third\n", encoding="utf-8")
    p = plan(load(_workload(tmp_path, "corpus"))[0], "g2")
    assert _train_file(p) == "{run_dir}/train.txt"
    (f,) = [f for f in p.files if f.path == "train.txt"]
    assert f.content == "first line\nsecond\nthird\n"
    assert any("converted at plan time" in n for n in p.notes)


def test_jsonl_becomes_train_json_and_an_accepted_file_is_passed_as_it_is(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    p = plan(load(_workload(tmp_path, "d.jsonl"))[0], "g2")
    assert _train_file(p) == "{run_dir}/train.json"
    assert next(f for f in p.files if f.path == "train.json").content == '{"text": "a"}\n{"text": "b"}\n'
    (tmp_path / "c.txt").write_text("hello\n", encoding="utf-8")
    p = plan(load(_workload(tmp_path, "c.txt"))[0], "g2")
    assert _train_file(p) == str(tmp_path / "c.txt") and not [f for f in p.files if f.path.startswith("train.")]


@pytest.mark.parametrize("make,needle", [
    (lambda d: (d / "x.parquet").write_bytes(b"PAR1"), "x.parquet is neither"),
    (lambda d: ((d / "m").mkdir(), (d / "m" / "a.txt").write_text("a"), (d / "m" / "b.csv").write_text("c\n1")),
     "holds .csv, .txt"),
    (lambda d: ((d / "big").mkdir(), (d / "big" / "a.txt").write_text("x" * (MAX_CONVERTED_BYTES + 1))),
     f"over {MAX_CONVERTED_BYTES} bytes"),
])
def test_what_the_script_cannot_read_is_refused_at_the_dataset_line_by_plan_and_validate(tmp_path, make, needle):
    make(tmp_path)
    data = {"x.parquet is neither": "x.parquet", "holds .csv, .txt": "m"}.get(needle, "big")
    path = _workload(tmp_path, data)
    with pytest.raises(PlanError) as exc:
        plan(load(path)[0], "g2")
    (d,) = exc.value.diagnostics
    assert d.code == "E520" and needle in d.hint and "`train_file` should be a csv or a json or a txt file" in d.hint
    assert "dataset files" in path.read_text().splitlines()[d.span.line - 1]
    _, diags = validate(path)
    assert [(x.code, x.span, x.severity) for x in diags if x.code == "E520"] == [("E520", d.span, "warning")]


def test_summarization_reads_csv_or_json_only_so_a_text_folder_is_refused(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("x\n", encoding="utf-8")
    with pytest.raises(PlanError, match="no backend can run") as exc:
        plan(load(_workload(tmp_path, "corpus", "seq2seq", "t5-small", "t5"))[0], "g2")
    assert "run_summarization.py reads one csv or json file" in exc.value.diagnostics[0].hint


@pytest.mark.slow
@pytest.mark.skipif(not HABANA_PY.exists(), reason="no .venv-habana: the optimum-habana check cannot run")
def test_optimum_habanas_own_argument_and_data_checks_accept_the_converted_file_and_reject_a_folder(tmp_path):

    from accelctl.api import check_plan

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("hello\n", encoding="utf-8")
    spec = load(_workload(tmp_path, "corpus"))[0]
    p = plan(spec, "g2")
    (good,) = check_plan(p, spec)
    assert good.ok, good.messages
    argv = list(p.launches[0].argv)
    argv[argv.index("--train_file") + 1] = str(tmp_path / "corpus")  # what 7b59439 rendered
    bad = replace(p, launches=(replace(p.launches[0], argv=tuple(argv)),))
    (result,) = check_plan(bad, spec)
    assert result.ok is False and any("`train_file` should be a csv or a json or a txt file" in m
                                      for m in result.messages)


# ------------------------------------------------------------------ {optimum_habana}

BLOOMZ = ROOT / "workloads" / "bloomz.wl"


def _example_plan():
    spec = next(s for s in load(BLOOMZ) if s.name == "bloomz_176b")
    return plan(spec, "gaudi2_example")


def test_every_format_fills_optimum_habana_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPTIMUM_HABANA_DIR", "/opt/optimum-habana")
    p = _example_plan()
    for fmt in ("text", "sh", "json"):
        out = render_plan(p, fmt)
        assert "{optimum_habana}" not in out and "/opt/optimum-habana/examples/text-generation" in out, fmt
    assert "cd /opt/optimum-habana/examples/text-generation &&" in render_plan(p, "sh")


def test_without_the_variable_sh_reads_it_when_it_runs_and_text_json_name_it(monkeypatch):
    monkeypatch.delenv("OPTIMUM_HABANA_DIR", raising=False)
    p = _example_plan()
    sh = render_plan(p, "sh")
    assert "{optimum_habana}" not in sh
    assert ': "${OPTIMUM_HABANA_DIR:?set OPTIMUM_HABANA_DIR to the optimum-habana checkout}"' in sh
    assert "cd ''\"$OPTIMUM_HABANA_DIR\"'/examples/text-generation' &&" in sh
    for fmt in ("text", "json"):
        assert "$OPTIMUM_HABANA_DIR" in render_plan(p, fmt) and "not set here" in render_plan(p, fmt)
    doc = json.loads(render_plan(p, "json"))
    assert any("OPTIMUM_HABANA_DIR" in w for w in doc["warnings"])


def test_the_sh_script_stops_naming_the_variable(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.delenv("OPTIMUM_HABANA_DIR", raising=False)
    script = tmp_path / "plan.sh"
    script.write_text(render_plan(_example_plan(), "sh"), encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path / "run"), "FREE_PORT": "29555"}
    cp = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode != 0 and "OPTIMUM_HABANA_DIR: set OPTIMUM_HABANA_DIR to the optimum-habana checkout" \
        in cp.stderr


def test_run_refuses_before_a_run_folder_when_the_variable_is_unset(tmp_path, monkeypatch, capsys):
    from accelctl import cli
    from accelctl.plan import select

    monkeypatch.delenv("OPTIMUM_HABANA_DIR", raising=False)
    monkeypatch.setattr(select, "present_adapters", lambda: {"cpu": "always", "hpu": "a Gaudi (test)"})
    runs = tmp_path / "runs"
    code = cli.main(["run", str(BLOOMZ), "-w", "bloomz_176b", "-t", "gaudi2_example", "--headless",
                     "--runs-dir", str(runs)])
    assert code == 1 and "OPTIMUM_HABANA_DIR" in capsys.readouterr().err
    assert not runs.exists()

"""The command line: plan --diff, plan without torch, doctor, and bad input before launch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import exitcodes

from accelctl.cli import EXIT_CHECK_NOT_RUN, main
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "deepspeed", "textual", "transformers", "timm", "diffusers")


def _accelctl(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_plan_of_every_workload_imports_no_heavy_stack():
    code = ("import sys, glob\nfrom accelctl.cli import main\n"
            "for f in sorted(glob.glob('workloads/*.wl')):\n"
            "    main(['plan', f, '--format', 'json'])\n"
            f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "HEAVY []" in cp.stderr, cp.stderr[-2000:]


def test_plan_diff_shows_what_changes_between_targets(capsys):
    assert main(["plan", str(ROOT / "workloads" / "vit_fp8.wl"), "--diff", "p4d", "p5_fp8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- target p4d\n+++ target p5_fp8")
    assert "-#   backend torchrun, engine local, device a100_40gb" in out
    assert "+#   backend te_fp8, engine local, device h100" in out
    assert '+    "micro": 128' in out and '-    "micro": 64' in out


def test_plan_diff_of_a_target_that_cannot_be_planned_shows_the_reason(capsys):
    assert main(["plan", str(ROOT / "workloads" / "t5_3b_summarization.wl"), "--diff", "gaudi2", "gaudi1"]) == 0
    out = capsys.readouterr().out
    assert "+# plan: workload t5_3b_summarization -> target gaudi1: cannot be planned" in out
    assert "error[E530]" in out


def test_plan_diff_unknown_target_is_an_error(capsys):
    assert main(["plan", str(ROOT / "workloads" / "vit_fp8.wl"), "--diff", "p4d", "p6"]) == 1
    assert "no target 'p6'" in capsys.readouterr().err


def test_plan_full_of_a_file_prints_plans_and_refusals_and_exits_1(capsys):
    rc = main(["plan", str(ROOT / "workloads" / "t5_3b_summarization.wl"), "--full"])
    cap = capsys.readouterr()
    assert rc == 1
    assert "# plan: workload t5_3b_summarization -> target gaudi2\n" in cap.out
    assert "target gaudi1: cannot be planned" in cap.out and "error[E530]" in cap.err


def test_plan_of_several_targets_is_a_summary_row_each_and_exits_1_on_a_refusal(capsys):
    """issue 27: `plan FILE` printed 1,154 lines for bert_large_pretrain.wl; now a row per
    workload x target (backend, engine, devices, parameters, memory) with its launch command or refusal."""
    rc = main(["plan", str(ROOT / "workloads" / "t5_3b_summarization.wl")])
    cap = capsys.readouterr()
    assert rc == 1 and "error[E530]" in cap.err  # the refusal's positioned diagnostic, as before
    lines = cap.out.splitlines()
    assert lines[0] == "workload t5_3b_summarization" and lines[1].split() == [
        "target", "backend", "engine", "devices", "params", "memory", "per", "device"]
    row = next(i for i, ln in enumerate(lines) if ln.startswith("a100 "))
    assert lines[row].split()[:5] == ["a100", "torchrun", "local", "8", "x"] and "80.00 GB fits" in lines[row]
    assert lines[row + 1].startswith("    $ ") and "torchrun" in lines[row + 1]
    refused = next(i for i, ln in enumerate(lines) if ln.startswith("gaudi1 "))
    assert lines[refused + 1].startswith("    refused E530: t5_3b_summarization does not fit on target gaudi1")
    assert "# plan:" not in cap.out and len(lines) < 20
    # several workloads: the workload is a column
    # (seed 000's BERT-base at 512 tokens, micro-batch 64, does not fit a Gaudi1: one refusal, exit 1)
    assert main(["plan", str(ROOT / "workloads" / "bert_large_pretrain.wl")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["workload", "target"] and sum(ln.startswith("bert_large_phase1_bs") for ln in out) == 8


@pytest.mark.parametrize("args,code,message", [
    (["run", "missing.wl"], 2, "no such workload file: missing.wl"),
    (["run", "workloads/bloomz.wl", "--target", "nope"], 1, "has no target 'nope'"),
    (["run", "workloads/bloomz.wl", "--workload", "nope"], 1, "has no workload 'nope'"),
])
def test_run_refuses_bad_input_before_launching(tmp_path, args, code, message):
    cp = _accelctl(*args, "--runs-dir", str(tmp_path / "runs"))
    assert cp.returncode == code
    assert message in cp.stderr
    assert not (tmp_path / "runs").exists()


def test_run_of_an_invalid_workload_or_missing_dataset_launches_nothing(tmp_path):
    bad = tmp_path / "bad.wl"
    bad.write_text('workload w {\n  task pretrain\n  model bert\n  dataset files("no/such/dir")\n'
                   '  precision bf61\n}\n', encoding="utf-8")
    cp = _accelctl("run", str(bad), "--runs-dir", str(tmp_path / "runs"))
    assert cp.returncode == 1
    assert f"{bad}:4:17: error[E412]: dataset path does not exist: no/such/dir" in cp.stderr
    assert f"{bad}:5:13: error[E203]: unknown precision 'bf61'" in cp.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_doctor_reports_this_machine_without_crashing():
    cp = _accelctl("doctor", "--json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)["result"]
    probes = {p["name"]: p for p in d["probes"]}
    assert probes["torch"]["ok"] and probes["torch"]["facts"]["version"].startswith("2.14.1")
    assert "cpu" in d["host"]["adapters_present"]
    assert isinstance(d["host"]["native_bf16"], bool)
    # the compiler inductor needs for optimize { compile = on } on the CPU: g++ on this machine kind
    assert d["host"]["cxx_compiler"].endswith("++")
    # absent stacks are reported, not raised
    assert not probes["habana"]["ok"] and "habana_frameworks" in probes["habana"]["error"]


@pytest.mark.slow  # four doctor processes, each probing the devices and tools: 15-40 s
def test_doctor_names_the_extras_installed_and_what_each_target_of_a_file_does_here(tmp_path):
    """issue 27: doctor said nothing of extras or of which targets could run here."""
    import importlib.metadata as md

    cp = _accelctl("doctor", "workloads/llama2_7b.wl", "workloads/ddp_cpu.wl", "--json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)["result"]
    extras = {e["extra"]: e for e in d["extras"]}
    assert set(extras) >= {"run", "tui", "report", "deepspeed", "xla", "gaudi", "bench", "dev"}
    assert ["torch", md.version("torch")] in extras["run"]["installed"] and not extras["run"]["missing"]
    # accelerate is the bench extra's, which scripts/setup.sh does not install
    assert extras["bench"]["missing"] == [["accelerate", "==1.15.0"]]
    assert not extras["xla"]["installed"] and ".venv-xla" in extras["xla"]["elsewhere"]
    verdicts = {(t["workload"], t["target"]): (t["verdict"], t["detail"]) for t in d["targets"]}
    assert verdicts[("ddp_cpu", "cpu")] == ("runs here", "accelctl run workloads/ddp_cpu.wl -w ddp_cpu -t cpu")
    verdict, detail = verdicts[("llama2_7b_zero3", "gaudi2")]  # no HPU on this machine
    assert verdict == "rehearse here" and detail.endswith("-t gaudi2 --rehearse") and "8 x gaudi2" in detail
    assert verdicts[("llama2_7b_zero3", "h100")][0] == "through slurm"
    # a file that does not load says so; a missing one is a usage error
    bad = tmp_path / "bad.wl"
    bad.write_text("workload w {\n  precision bf61\n}\n")
    cp = _accelctl("doctor", str(bad), "--json")
    assert json.loads(cp.stdout)["result"]["targets"][0]["verdict"] == "invalid"
    assert _accelctl("doctor", str(tmp_path / "none.wl")).returncode == exitcodes.USAGE
    # the text: the host first, the extras and the targets after the probes
    out = _accelctl("doctor", "workloads/ddp_cpu.wl").stdout
    assert out.index("cpu: ") < out.index("extras") < out.index("ddp_cpu / cpu: runs here")


def test_runs_lists_the_store_newest_first(capsys):
    store = ROOT / "tests" / "report" / "fixtures" / "store"
    ids = sorted((p.name for p in store.iterdir() if p.is_dir()), reverse=True)
    assert main(["runs", "--runs-dir", str(store), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["result"]["runs"]
    assert [r["id"] for r in listed] == ids
    assert main(["runs", "--runs-dir", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"runs ({len(ids)})" in out and " ms " in out


def test_plan_check_asks_the_real_tools(capsys):
    assert main(["plan", str(ROOT / "workloads" / "ddp_cpu.wl"), "-w", "zero2_cpu", "--check"]) == 0
    assert "# check: deepspeed (DeepSpeedConfig, launcher parser, hostfile): ok" in capsys.readouterr().out
    rc = main(["plan", str(ROOT / "workloads" / "vit_fp8.wl"), "-t", "p5_fp8", "--check"])
    out = capsys.readouterr().out
    assert "# check: torchrun parser (torchrun): ok" in out
    if "# check: transformer_engine 2.20.2 source: ok" in out:
        assert rc == 0
    else:  # TE's source is not installed here: the plan is unchecked, and the exit status says so
        assert "transformer_engine: NOT RUN" in out and rc == EXIT_CHECK_NOT_RUN


def test_plan_check_that_could_not_run_fails_unless_allowed(tmp_path, monkeypatch, capsys):
    """A check whose tool is missing is no pass: exit 3, "NOT RUN" on the check's line;
    --allow-unavailable accepts it (exit 0)."""
    monkeypatch.setenv("HABANA_VENV", str(tmp_path / "no-venv"))
    args = ["plan", str(ROOT / "workloads" / "bloomz.wl"), "-w", "bloomz_176b", "-t", "gaudi2", "--check"]
    assert main(args) == EXIT_CHECK_NOT_RUN == 3
    captured = capsys.readouterr()
    assert "# check: optimum-habana: NOT RUN" in captured.out
    assert "1 check(s) NOT RUN" in captured.err and "--allow-unavailable" in captured.err
    assert main([*args, "--allow-unavailable"]) == 0
    assert "# check: optimum-habana: NOT RUN" in capsys.readouterr().out
    # the same with --format json: the plan on stdout, the check's line on stderr
    assert main([*args, "--format", "json"]) == EXIT_CHECK_NOT_RUN
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    (entry,) = doc["result"]["plans"]
    assert entry["plan"]["backend"] == "gaudi" and "NOT RUN" in captured.err
    assert [c["ok"] for c in entry["checks"]] == [None] and doc["error"]["type"] == "CheckNotRun"


def test_plan_check_rejection_keeps_exit_1_even_beside_a_check_not_run(monkeypatch, capsys):
    from accelctl.backends.findings import CheckResult, not_run
    from accelctl.plan import registry

    backend = registry.BACKENDS["gaudi"]
    monkeypatch.setattr(type(backend), "check", lambda self, plan, spec: [
        not_run("tool a", "not installed"), CheckResult("tool b", False, ["bad flag --x"])])
    args = ["plan", str(ROOT / "workloads" / "bloomz.wl"), "-w", "bloomz_176b", "-t", "gaudi2", "--check"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "# check: tool a: NOT RUN" in out and "# check: tool b: REJECTED" in out
    assert main([*args, "--allow-unavailable"]) == 1  # a rejection is never allowed away


def test_plan_check_reports_a_rejected_command():

    from accelctl.api import load, plan
    from accelctl.plan.checks import check_plan

    spec = load(ROOT / "workloads" / "ddp_cpu.wl")[0]
    p = plan(spec, "cpu")
    bad = replace(p, launches=(replace(p.launches[0], argv=("torchrun", "--max-restarts", "x",
                                                            "w.py")),))
    (result,) = check_plan(bad, spec)
    assert result.ok is False and "invalid int value" in result.messages[0]


def test_a_reader_that_goes_away_is_no_traceback():
    """`accelctl plan FILE | true`: the reader is gone before the first write; accelctl stops quietly."""
    import subprocess
    import sys

    cmd = (f"{sys.executable} -m accelctl.cli plan {ROOT / 'workloads' / 'vit_fp8.wl'} -t p5_fp8 -f json"
           " | true; echo ${PIPESTATUS[0]}")
    proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stdout.strip() in ("0", "141")


def test_a_command_builds_only_the_parser_of_its_verb():
    """``accelctl validate F`` builds ``validate``'s parser, not the other verbs' (each listed by
    its help line alone): building all 18 costs every cold command their modules' imports."""
    from accelctl.cli import VERBS, build_parser

    argv = ["validate", "workloads/bloomz.wl"]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    assert args.cmd == "validate" and args.files == ["workloads/bloomz.wl"]
    assert list(parser.verbs) == list(VERBS)  # every verb still a choice, in order
    built = [verb for verb, p in parser.verbs.items() if p.arguments]
    assert built == ["validate"]


def test_help_lists_every_verb_with_its_line_of_the_verb_table(capsys):
    """``accelctl --help`` lists every verb of ``VERBS``, in order, each with its help line, though
    no verb's parser is built for it."""
    from accelctl.cli import VERBS

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("positional arguments:")[1].splitlines()
              if line.startswith("    ") and not line.startswith("     ")]
    assert listed == list(VERBS)
    text = " ".join(out.split())
    for verb, (_, line) in VERBS.items():
        assert " ".join(line.replace("%%", "%").split()) in text, verb


def test_a_verb_table_entry_that_adds_no_parser_is_a_clear_bug(monkeypatch):
    """A ``VERBS`` entry whose function adds no parser for its verb fails when the verb is looked
    up, naming the entry, instead of parsing with a missing verb."""
    from accelctl import cli

    monkeypatch.setattr(cli, "add_nothing", lambda sub: None, raising=False)
    monkeypatch.setitem(cli.VERBS, "validate", ("accelctl.cli:add_nothing", "check workload files"))
    with pytest.raises(RuntimeError, match="accelctl.cli:add_nothing did not add the parser of 'validate'"):
        cli.build_parser(["validate", "x.wl"])

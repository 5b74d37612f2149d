"""Machine-readable, always: every verb with ``--json`` (or ``-f json``) writes exactly one
JSON document on stdout (``accelctl.reply``) -- on success, on diagnostics, on a refused
target, a missing file, an unknown run id, a usage error, Ctrl-C and a bug -- with the
documented exit status (``accelctl.exitcodes``) and the diagnostics inside.

The verbs run in this process through ``accelctl.cli.main`` (stdout captured); ``run`` and
the usage errors also run as real ``python -m accelctl.cli`` processes, where nothing but
the document may reach file descriptor 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import exitcodes
from accelctl.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "tests" / "report" / "fixtures" / "store"
GOOD = str(ROOT / "workloads" / "tiny_gpt2.wl")
T5 = str(ROOT / "workloads" / "t5_3b_summarization.wl")  # gaudi1 is refused: it does not fit (E530)
#: an invalid workload: an unknown precision on line 5, column 13
BAD_TEXT = ('workload w {\n  task pretrain\n  model bert(layers = 1, hidden = 32, heads = 2, vocab = 100)\n'
            '  dataset synthetic(seq_len = 8 tokens)\n  precision bf61\n  target cpu { devices = 1 }\n}\n')
#: the cheapest real run the suite makes (tests/report/test_tracking.py): a 1-layer ViT, 6 steps
TINY_RUN = """\
workload tiny_json {
  task pretrain { objective = classification }
  model vit(layers = 1, hidden = 32, heads = 2, image_size = 16, patch = 8, classes = 10)
  dataset synthetic(image_size = 16, channels = 3, classes = 10)
  optimizer sgd(lr = 0.01)
  precision fp32
  batch { micro = 4 }
  measure { warmup = 1 step  steps = 5 steps }
  target cpu { devices = 1  threads = 1 }
}
"""
RUN_1 = "20260101-000000-fixture_train-small-0001"
RUN_GEN = "20260101-000400-fixture_gen-cpu-0005"

# (id, argv with {bad} = an invalid workload file, exit status, what the document holds)
CASES = [
    ("validate-good", ["validate", "--json", GOOD], exitcodes.OK, {}),
    ("validate-bad", ["validate", "--json", "{bad}"], exitcodes.FAILED, {"code": "E203", "line": 5, "column": 13}),
    ("validate-missing", ["validate", "--json", "missing.wl"], exitcodes.FAILED, {"code": "E001"}),
    ("validate-usage", ["validate", "--json"], exitcodes.USAGE, {"error": "UsageError"}),
    ("plan-good", ["plan", GOOD, "--json"], exitcodes.OK, {}),
    ("plan-f-json", ["plan", GOOD, "-f", "json"], exitcodes.OK, {}),
    ("plan-bad", ["plan", "{bad}", "--json"], exitcodes.FAILED, {"code": "E203", "line": 5}),
    ("plan-refused", ["plan", T5, "--json"], exitcodes.FAILED, {"code": "E530", "line": 59}),
    ("plan-no-target", ["plan", GOOD, "-t", "gpu", "--json"], exitcodes.FAILED, {"code": "E597", "line": 14}),
    ("plan-no-workload", ["plan", GOOD, "-w", "nope", "--json"], exitcodes.FAILED, {"code": "E598"}),
    ("plan-missing", ["plan", "missing.wl", "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("plan-usage", ["plan", GOOD, "--format", "xml", "--json"], exitcodes.USAGE, {"error": "UsageError"}),
    ("plan-diff", ["plan", T5, "--diff", "gaudi2", "a100", "--json"], exitcodes.OK, {}),
    ("plan-fp8-alone", ["plan", GOOD, "--fp8", "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("estimate-good", ["estimate", GOOD, "--json"], exitcodes.OK, {}),
    ("estimate-bad", ["estimate", "{bad}", "-f", "json"], exitcodes.FAILED, {"code": "E203"}),
    ("estimate-missing", ["estimate", "missing.wl", "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("estimate-no-target", ["estimate", GOOD, "-t", "gpu", "--json"], exitcodes.FAILED, {"code": "E597"}),
    ("estimate-unknown-run", ["estimate", GOOD, "--calibrate", "nope", "--runs-dir", str(STORE), "--json"],
     exitcodes.USAGE, {"code": "E582"}),
    ("run-bad", ["run", "{bad}", "--json", "--runs-dir", "{runs}"], exitcodes.FAILED, {"code": "E203"}),
    ("run-missing", ["run", "missing.wl", "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("run-no-target", ["run", GOOD, "-t", "gpu", "--json", "--runs-dir", "{runs}"], exitcodes.FAILED,
     {"code": "E597"}),
    ("run-no-file", ["run", "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("run-resume-unknown", ["run", "--resume", "nope", "--json", "--runs-dir", str(STORE)], exitcodes.USAGE,
     {"error": "AccelctlError"}),
    ("run-usage", ["run", GOOD, "-f", "json"], exitcodes.USAGE, {"error": "UsageError"}),
    ("runs-good", ["runs", "--json", "--runs-dir", str(STORE)], exitcodes.OK, {}),
    ("runs-unreadable-store", ["runs", "--json", "--runs-dir", GOOD], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("runs-rm-unknown-run", ["runs", "rm", "nope", "--json", "--runs-dir", str(STORE)], exitcodes.USAGE,
     {"error": "AccelctlError"}),
    ("runs-gc-usage", ["runs", "gc", "--json", "--runs-dir", str(STORE)], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("runs-gc-dry-run", ["runs", "gc", "--failed", "--dry-run", "--json", "--runs-dir", str(STORE)], exitcodes.OK, {}),
    *[case for verb in ("status", "logs", "attach", "cancel") for case in (
        (f"{verb}-good", [verb, RUN_1, "--json", "--runs-dir", str(STORE)], exitcodes.OK, {}),
        (f"{verb}-unknown-run", [verb, "nope", "--json", "--runs-dir", str(STORE)], exitcodes.USAGE,
         {"error": "AccelctlError"}))],
    ("report-good", ["report", "--json", "--runs-dir", str(STORE)], exitcodes.OK, {}),
    ("report-unknown-run", ["report", "nope", "--json", "--runs-dir", str(STORE)], exitcodes.USAGE,
     {"error": "AccelctlError"}),
    ("report-usage", ["report", "--json", "--bogus"], exitcodes.USAGE, {"error": "UsageError"}),
    ("compare-good", ["compare", RUN_1, RUN_1, "--json", "--runs-dir", str(STORE)], exitcodes.OK, {}),
    ("compare-refused", ["compare", RUN_1, RUN_GEN, "--json", "--runs-dir", str(STORE)], exitcodes.USAGE,
     {"code": "E227"}),
    ("compare-unknown-run", ["compare", RUN_1, "nope", "-f", "json", "--runs-dir", str(STORE)], exitcodes.USAGE,
     {"error": "AccelctlError"}),
    ("sweep-missing", ["sweep", "missing.wl", "-t", "cpu", "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("sweep-bad-counts", ["sweep", GOOD, "-t", "cpu", "-d", "one", "--json"], exitcodes.USAGE,
     {"error": "AccelctlError"}),
    ("sweep-no-target", ["sweep", GOOD, "-t", "gpu", "-d", "1", "--json", "--runs-dir", "{runs}"], exitcodes.FAILED,
     {"code": "E597"}),
    ("sweep-usage", ["sweep", GOOD, "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),  # -t or --over
    ("sweep-over-estimate", ["sweep", T5, "--over", "batch.micro=1,2", "--estimate", "--json"], exitcodes.OK, {}),
    ("sweep-over-bad-value", ["sweep", T5, "--over", "batch.micro=0", "--estimate", "--json"], exitcodes.FAILED,
     {"code": "E304"}),
    ("pick-good", ["pick", T5, "--work", "1e6 samples", "--json"], exitcodes.OK, {}),
    ("pick-bad-work", ["pick", T5, "--work", "5 GB", "--json"], exitcodes.FAILED, {"code": "E232"}),
    ("fit-good", ["fit", T5, "-t", "gaudi2", "--json"], exitcodes.OK, {}),
    ("fit-no-target", ["fit", T5, "-t", "gpu", "--json"], exitcodes.FAILED, {"code": "E597"}),
    ("doctor-plan-missing", ["doctor", "--plan", "missing.wl", "--json"], exitcodes.USAGE,
     {"error": "AccelctlError"}),
    ("doctor-calibrate-usage", ["doctor", "--calibrate", "--seconds", "0", "--json"], exitcodes.USAGE,
     {"error": "AccelctlError"}),
    ("completion-good", ["completion", "bash", "--json"], exitcodes.OK, {}),
    ("init-good", ["init", "bert", "-o", "-", "--json"], exitcodes.OK, {}),
    ("init-usage", ["init", "org/mystery", "--json"], exitcodes.USAGE, {"error": "AccelctlError"}),
    ("completion-usage", ["completion", "tcsh", "--json"], exitcodes.USAGE, {"error": "UsageError"}),
    ("tui-has-no-json", ["tui", "--json"], exitcodes.USAGE, {"error": "UsageError"}),
    ("no-verb", ["--json"], exitcodes.USAGE, {"error": "UsageError"}),
    ("help", ["plan", "--help", "--json"], exitcodes.OK, {"text": "usage: accelctl plan"}),
]
#: verbs whose success case runs as a real process below (a real run; the host probes)
ELSEWHERE = {"run": "test_run_json_is_the_finished_run", "sweep": "test_run_json_is_the_finished_run",
             "doctor": "test_doctor_json_is_one_document"}


def _argv(argv: list[str], tmp_path: Path) -> list[str]:
    bad = tmp_path / "bad.wl"
    bad.write_text(BAD_TEXT, encoding="utf-8")
    return [a.replace("{bad}", str(bad)).replace("{runs}", str(tmp_path / "runs")) for a in argv]


def check_document(out: str, code: int, expected: int, want: dict) -> dict:
    """``out`` is one JSON document saying ``expected``, and it holds what ``want`` names."""
    doc = json.loads(out)  # raises unless stdout is exactly one JSON document
    assert code == expected == doc["exit_code"], doc
    assert doc["ok"] is (expected == exitcodes.OK) and doc["exit"] == exitcodes.name(expected)
    assert doc["schema"] == 1 and isinstance(doc["result"], dict) and isinstance(doc["diagnostics"], list)
    if expected == exitcodes.OK:
        assert doc["error"] is None and not [d for d in doc["diagnostics"] if d["severity"] == "error"], doc
    else:
        assert doc["error"] is not None or doc["diagnostics"], "a failure says why"
    if "code" in want:
        diag = next((d for d in doc["diagnostics"] if d["code"] == want["code"]), None)
        assert diag is not None, doc["diagnostics"]
        assert diag["message"] and diag["path"]
        for key in ("line", "column"):
            if key in want:
                assert diag[key] == want[key], diag
    if "error" in want:
        assert doc["error"]["type"] == want["error"] and doc["error"]["message"], doc["error"]
    if "text" in want:
        assert want["text"] in doc["result"]["text"]
    return doc


@pytest.mark.parametrize("argv,expected,want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_verb_answers_one_json_document(argv, expected, want, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "missing.wl" is missing; nothing lands in the repository
    monkeypatch.setenv("ACCELCTL_RUNS_DIR", str(tmp_path / "runs"))
    code = main(_argv(argv, tmp_path))
    captured = capsys.readouterr()
    doc = check_document(captured.out, code, expected, want)
    assert doc["command"] == (None if argv[0].startswith("-") else argv[0])
    assert not (tmp_path / "runs").exists() or argv[0] != "run", "nothing was launched"


def test_every_verb_is_covered():
    """A new verb needs its JSON cases here."""
    verbs = build_parser().verbs
    covered = {c[1][0] for c in CASES if c[2] == exitcodes.OK} | set(ELSEWHERE)
    failing = {c[1][0] for c in CASES if c[2] != exitcodes.OK}
    assert set(verbs) - {"tui"} <= covered, set(verbs) - covered
    assert set(verbs) <= failing, set(verbs) - failing


def test_results_carry_what_each_verb_produced(tmp_path, capsys):
    """The result of each verb, as docs/cli.md describes it."""
    main(["plan", T5, "--json"])
    plans = json.loads(capsys.readouterr().out)["result"]["plans"]
    refused = {p["target"]: p for p in plans if p["refused"]}
    assert set(refused) == {"gaudi1"} and refused["gaudi1"]["diagnostics"][0]["code"] == "E530"
    assert all(p["plan"]["target"] == p["target"] for p in plans if not p["refused"])
    main(["estimate", GOOD, "--json"])
    estimates = json.loads(capsys.readouterr().out)["result"]["estimates"]
    assert [(e["workload"], e["target"]) for e in estimates] == [("tiny_gpt2_train", "cpu"),
                                                                  ("tiny_gpt2_generate", "cpu")]
    main(["validate", GOOD, "--json"])
    (file,) = json.loads(capsys.readouterr().out)["result"]["files"]
    assert file["ok"] and file["workloads"] == ["tiny_gpt2_train", "tiny_gpt2_generate"]
    main(["compare", RUN_1, RUN_1, "--json", "--runs-dir", str(STORE)])
    result = json.loads(capsys.readouterr().out)["result"]
    assert result["verdict"] and result["tables"][0]["rows"]
    out = tmp_path / "report.json"
    main(["report", "--json", "--runs-dir", str(STORE), "-o", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert doc["result"]["output"] == str(out) and json.loads(out.read_text())["tables"] == doc["result"]["tables"]


def test_a_bug_and_ctrl_c_are_json_too(monkeypatch, capsys):
    """An unexpected exception: the traceback on stderr, the error in the document, exit 70;
    Ctrl-C: exit 130."""
    import accelctl.api

    def boom(path, host=None):
        raise RuntimeError("the validator broke")

    monkeypatch.setattr(accelctl.api, "validate", boom)
    doc = check_document(*_run_main(capsys, ["validate", GOOD, "--json"]), exitcodes.INTERNAL, {"error": "RuntimeError"})
    assert "the validator broke" in doc["error"]["message"]
    assert main(["validate", GOOD]) == exitcodes.INTERNAL  # the same status without --json
    assert "Traceback" in capsys.readouterr().err

    def interrupted(path, host=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(accelctl.api, "validate", interrupted)
    check_document(*_run_main(capsys, ["validate", GOOD, "--json"]), exitcodes.STOPPED, {"error": "KeyboardInterrupt"})


def _run_main(capsys, argv: list[str]) -> tuple[str, int]:
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" in captured.err or code != exitcodes.INTERNAL
    return captured.out, code


def test_usage_errors_stay_argparse_text_without_json(capsys):
    assert main(["plan"]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: accelctl plan") and "accelctl plan: error: the following arguments are required: file" in err


def _accelctl(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_usage_error_of_a_real_process_is_json(tmp_path):
    cp = _accelctl("report", "--json", "--format", "yaml", cwd=tmp_path)
    doc = check_document(cp.stdout, cp.returncode, exitcodes.USAGE, {"error": "UsageError"})
    assert "invalid choice: 'yaml'" in doc["error"]["message"] and doc["command"] == "report"
    assert doc["error"]["usage"].startswith("usage: accelctl report")


def test_what_a_library_or_a_child_writes_to_descriptor_1_goes_to_stderr():
    code = ("import os, subprocess, sys\nimport accelctl.api as api\nreal = api.validate\n"
            "def noisy(path, host=None):\n"
            "    os.write(1, b'noise on fd 1\\n')\n"
            "    subprocess.run([sys.executable, '-c', 'print(\"noise of a child\")'])\n"
            "    print('noise of print')\n"
            "    return real(path, host)\n"
            "api.validate = noisy\n"
            "from accelctl.cli import main\nsys.exit(main(['validate', '--json', sys.argv[1]]))\n")
    cp = subprocess.run([sys.executable, "-c", code, GOOD], capture_output=True, text=True, timeout=120, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    check_document(cp.stdout, cp.returncode, exitcodes.OK, {})
    for noise in ("noise on fd 1", "noise of a child", "noise of print"):
        assert noise in cp.stderr and noise not in cp.stdout


@pytest.mark.slow
def test_doctor_json_is_one_document():
    cp = _accelctl("doctor", "--json")
    doc = check_document(cp.stdout, cp.returncode, exitcodes.OK, {})
    assert {"host", "probes", "calibrations"} <= set(doc["result"])


@pytest.mark.slow
def test_run_json_is_the_finished_run(tmp_path):
    """A real CPU run: the console stream on stderr, stdout the one document with the run's
    id, status, folder and summary.json."""
    wl = tmp_path / "tiny_json.wl"
    wl.write_text(TINY_RUN, encoding="utf-8")
    runs = tmp_path / "runs"
    cp = _accelctl("run", str(wl), "--json", "--runs-dir", str(runs), cwd=tmp_path)
    doc = check_document(cp.stdout, cp.returncode, exitcodes.OK, {})
    (run,) = doc["result"]["runs"]
    assert run["status"] == "ok" and run["workload"] == "tiny_json" and run["target"] == "cpu"
    summary = json.loads((runs / run["run_id"] / "summary.json").read_text())
    assert run["summary"]["stats"]["step_time"]["median"] == summary["stats"]["step_time"]["median"] > 0
    assert "accelctl: workload tiny_json -> target cpu" in cp.stderr  # the stream went to stderr
    # the stored run, through the other verbs' documents
    cp = _accelctl("runs", "--json", "--runs-dir", str(runs))
    (listed,) = check_document(cp.stdout, cp.returncode, exitcodes.OK, {})["result"]["runs"]
    assert listed["id"] == run["run_id"]
    # a one-point sweep: its run and its tables
    cp = _accelctl("sweep", str(wl), "-t", "cpu", "-d", "1", "--json", "--runs-dir", str(runs), cwd=tmp_path)
    result = check_document(cp.stdout, cp.returncode, exitcodes.OK, {})["result"]
    assert [r["status"] for r in result["runs"]] == ["ok"] and result["tables"][0]["rows"]


def test_exit_code_table_is_documented_once_in_readme_and_docs():
    table = exitcodes.markdown_table()
    for doc in ("README.md", "docs/cli.md"):
        assert table in (ROOT / doc).read_text(encoding="utf-8"), f"{doc}: paste exitcodes.markdown_table()"


@pytest.mark.parametrize("argv,wanted", [
    (["plan", "f.wl", "--json"], True), (["plan", "f.wl", "-f", "json"], True), (["report", "--format=json"], True),
    (["report", "-fjson"], True), (["report", "--format", "json"], True), (["plan", "f.wl", "-f", "sh"], False),
    (["plan", "--", "--json"], False), (["runs"], False),
])
def test_a_json_command_line_is_known_before_parsing(argv, wanted):
    from accelctl.reply import wants_json

    assert wants_json(argv) is wanted


def test_the_document_is_strict_json():
    """NaN and infinity (a ratio over a zero step time) are null, never a bare NaN token."""
    from accelctl.reply import Reply

    reply = Reply("compare")
    reply.result = {"speedup": float("nan"), "ci": (1.0, float("inf")), "path": ROOT}
    text = reply.text(exitcodes.OK)
    doc = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the document"))
    assert doc["result"] == {"speedup": None, "ci": [1.0, None], "path": str(ROOT)}


def _gen_workload(name: str, steps: int) -> str:
    return (f"workload {name} {{\n"
            '  task generate { prompt = "hello there" max_new_tokens = 8 tokens decoding = greedy kv_cache = on '
            "batch_size = 1 }\n"
            "  model gpt2(layers = 1, hidden = 32, heads = 2, vocab = 300, max_positions = 128)\n"
            "  precision fp32\n"
            f"  measure {{ warmup = 1 steps  steps = {steps} steps }}\n"
            "  target cpu { threads = 1  precision = fp32 }\n}\n")


@pytest.mark.slow
def test_run_json_of_workloads_sharing_one_worker(tmp_path):
    """Two workloads of one file whose stacks match run in ONE worker process (``accelctl.run.supervision.shared``):
    ``run --json`` holds both runs, in order, each its own record (exit 0); a Ctrl-C during the
    first is exit 130 (``stopped``), the stopped run in ``runs`` and the workload never started in
    ``not_run`` -- the exit codes of the README's table."""
    wl = tmp_path / "two.wl"
    wl.write_text(_gen_workload("first_gen", 2) + _gen_workload("second_gen", 2), encoding="utf-8")
    runs = tmp_path / "runs"
    cp = _accelctl("run", str(wl), "--json", "--runs-dir", str(runs), cwd=tmp_path)
    doc = check_document(cp.stdout, cp.returncode, exitcodes.OK, {})
    assert [(r["workload"], r["status"]) for r in doc["result"]["runs"]] == [("first_gen", "ok"), ("second_gen", "ok")]
    pids = {r["summary"]["launches"][0]["pid"] for r in doc["result"]["runs"]}
    assert len(pids) == 1, "one worker process ran both"
    assert len({r["run_id"] for r in doc["result"]["runs"]}) == 2 and "not_run" not in doc["result"]
    assert "one worker process runs workloads first_gen, second_gen" in cp.stderr

    wl.write_text(_gen_workload("long_gen", 5000) + _gen_workload("never_gen", 2), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "--json", "--runs-dir",
                             str(tmp_path / "runs2")], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:  # the console stream: stderr under --json
            if "[measure]" in line:
                break
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc = check_document(out, proc.returncode, exitcodes.STOPPED, {"error": "RunStopped"})
    assert [(r["workload"], r["status"]) for r in doc["result"]["runs"]] == [("long_gen", "stopped")]
    assert doc["result"]["not_run"] == ["never_gen"]

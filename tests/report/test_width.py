"""80 and 120 columns: ``runs``, ``report``, ``compare``, ``plan`` and ``validate`` in a real
terminal (a pseudo-terminal of that size, no $COLUMNS), snapshot against golden text, no
line longer than the terminal, the key figures present at 80; short run ids that the
store resolves; ``--wide``; the pipe rules (accelctl.report.width).

Refresh the snapshots after an intended change with
``ACCELCTL_UPDATE_GOLDEN=1 pytest tests/report/test_width.py`` (the one rule:
tests/golden_files.py).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_pty import in_pty
from golden_files import check_golden, check_no_stale

from accelctl.errors import Diagnostic, Span
from accelctl.report.width import short_ids

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
STORE = HERE / "fixtures" / "store"
GOLDEN = HERE / "golden" / "width"
#: every snapshot of this module: each command at 80 and 120 columns
GOLDEN_NAMES = {f"{name}.{width}.txt" for width in (80, 120)
                for name in ("runs", "report", "compare", "plan", "validate", "plan_diff", "estimate", "plan_check")}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")
#: a workload line much longer than 80 columns, its error in the middle
LONG_LINE = ('  target cpu { devices = 1  precision = "fp32"  engine = local  '
             'price_of_something_long_enough = 1  instance = "m7i.8xlarge" }\n')
BAD = "workload wide_one {\n  task pretrain { steps = 10 }\n  model bert(layers = 2)\n" + LONG_LINE + "}\n"


def in_terminal(columns: int, *argv: str, rows: int = 24, cwd: Path = ROOT) -> tuple[int, str]:
    """Run ``accelctl ARGV`` with stdout and stderr on a pseudo-terminal of ``columns`` x
    ``rows`` (no $COLUMNS: the width comes from the terminal); its text without colours."""
    code, raw = in_pty(list(argv), columns=columns, rows=rows, env={"TERM": "xterm", "NO_COLOR": "1"}, cwd=cwd,
                       stdin_tty=False)
    return code, ANSI.sub("", raw.decode("utf-8").replace("\r\n", "\n"))


def golden(name: str, text: str) -> None:
    assert name in GOLDEN_NAMES, f"{name}: add it to GOLDEN_NAMES (the stale-file check's list)"
    check_golden(GOLDEN / name, text)


def test_no_stale_snapshots():
    check_no_stale(GOLDEN, "*", GOLDEN_NAMES)


def fits(text: str, width: int) -> None:
    """No line wider than ``width`` terminal cells (a CJK character takes two)."""
    from rich.cells import cell_len

    long = [line for line in text.splitlines() if cell_len(line) > width]
    assert not long, f"{len(long)} line(s) longer than {width}:\n" + "\n".join(long)


def cells(text: str, first_cell: str) -> list[str]:
    """The cells of the table row whose first cell is ``first_cell``, each with the lines
    its text wraps onto joined."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"│ {first_cell} "))
    rows = []
    for line in lines[start:]:
        parts = line.split("│")[1:-1]
        if not parts or (rows and parts[0].strip()):
            break
        rows.append(parts)
    return [" ".join(r[c].strip() for r in rows).strip() for c in range(len(rows[0]))]


@pytest.mark.parametrize("width", [80, 120])
def test_runs_report_compare_fit_the_terminal(width):
    for name, argv in {"runs": ["runs"], "report": ["report"], "compare": ["compare", "0001", "0002"]}.items():
        code, out = in_terminal(width, *argv, "--runs-dir", str(STORE))
        assert code == 0, out
        fits(out, width)
        golden(f"{name}.{width}.txt", out)


def test_reference_tables_fit_80_columns_with_japanese_notes():
    """The seeds' tables: titles and notes in Japanese (two cells a character) wrap by cells."""
    code, out = in_terminal(80, "report", "--reference")
    assert code == 0 and "事前トレーニング" in out and "AWS DL1 blog" in out and "seed 0" not in out
    fits(out, 80)


def test_key_figures_at_80_columns():
    _, out = in_terminal(80, "runs", "--runs-dir", str(STORE))
    # id, workload, target, status, median step time, throughput: all on the row at 80
    assert cells(out, "0002") == ["0002", "fixture_train", "big", "ok", "115.1 ms", "138.98 sequences/s"]
    assert cells(out, "0004")[3] == "failed"
    assert "20260101-" not in out  # the full ids only with --wide
    _, out = in_terminal(80, "report", "--runs-dir", str(STORE))
    assert "workload fixture_train" in out and "workload fixture_gen" in out
    row = cells(out, "big4")
    assert row[:2] == ["big4", "0003"] and "132.3 ms -3.5/+3.7%" in row and "241.17 sequences/s" in row
    assert "left out at this width:" in out and "--wide" in out
    _, out = in_terminal(80, "compare", "0001", "0002", "--runs-dir", str(STORE))
    assert "compare small (0001) → big (0002)" in out
    assert cells(out, "step time")[1:4] == ["103.4 ms", "114.8 ms", "×0.90"]


def test_wide_shows_every_column_and_full_ids():
    code, out = in_terminal(80, "runs", "--runs-dir", str(STORE), "--wide")
    assert code == 0 and "20260101-000100-fixture_train-big-0002" in out and "started (UTC)" in out
    _, out = in_terminal(80, "report", "--runs-dir", str(STORE), "--wide")
    assert "20260101-000200-fixture_train-big4-0003" in out and "job cost" in out and "left out at this width" not in out
    assert max(len(line) for line in out.splitlines()) > 120


def test_short_ids_are_what_the_store_resolves(capsys):
    from accelctl.run.store import load_run

    ids = [p.name for p in STORE.iterdir() if p.is_dir()]
    short = short_ids(ids, ids)
    assert sorted(short.values()) == ["0001", "0002", "0003", "0004", "0005"]
    for full, tail in short.items():
        assert load_run(tail, STORE).id == full
    # a tail two runs share grows by whole segments until it is unique
    clash = ["20260101-000000-w-a-beef", "20260101-000100-w-b-beef", "20260101-000200-w-a-0001"]
    assert short_ids(clash[:1], clash) == {clash[0]: "a-beef"}
    assert short_ids(["x-1-beef"], ["y-1-beef", "x-1-beef"]) == {"x-1-beef": "x-1-beef"}


def test_a_pipe_keeps_the_old_widths(capsys, monkeypatch):
    """Not a terminal: rich tables honour $COLUMNS (as rich always did), else ``runs`` draws
    at 80 and ``report`` at 200; plans and diagnostics stay whole whatever $COLUMNS says."""
    from accelctl.cli import main

    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["runs", "--runs-dir", str(STORE)]) == 0
    out = capsys.readouterr().out
    fits(out, 80)
    assert main(["report", "--runs-dir", str(STORE)]) == 0
    out = capsys.readouterr().out
    fits(out, 200)
    assert "job cost" in out and "left out at this width" not in out  # 200 columns hold every column
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["report", "--runs-dir", str(STORE)]) == 0
    fits(capsys.readouterr().out, 100)
    assert main(["plan", str(ROOT / "workloads" / "ddp_cpu.wl"), "-w", "zero2_cpu"]) == 0
    plan = capsys.readouterr().out
    assert max(len(line) for line in plan.splitlines()) > 100  # the launch command on one line


def test_plan_folds_in_a_terminal_and_stays_one_command():
    """At 80 columns the comments wrap and the launch folds between its quoted words; the
    shell reads the folded command as the same words as the pipe's one-line command."""
    for width in (80, 120):  # an accelerator target: no host memory in its notes
        code, out = in_terminal(width, "plan", "workloads/vit_fp8.wl", "-t", "p5_fp8")
        assert code == 0, out
        fits(out, width)
        golden(f"plan.{width}.txt", out)
    wl = str(ROOT / "workloads" / "ddp_cpu.wl")
    whole = subprocess.run([sys.executable, "-m", "accelctl.cli", "plan", wl, "-w", "zero2_cpu"], cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120)
    _, folded = in_terminal(80, "plan", wl, "-w", "zero2_cpu")

    def launch_words(text: str) -> list[str]:
        command = text.split("# launch deepspeed (2 process(es))\n", 1)[1].rstrip("\n")
        out = subprocess.run(["sh", "-c", "printf '%s\\n' " + command], capture_output=True, text=True, check=True)
        return out.stdout.splitlines()

    assert " \\\n    " in folded.split("# launch deepspeed")[1]
    assert launch_words(folded) == launch_words(whole.stdout)
    assert launch_words(folded)[-3:] == ["--no_local_rank", "accelctl.worker", "{run_dir}/job.json"]


def test_validate_wraps_and_keeps_the_caret_on_its_word(tmp_path):
    bad = tmp_path / "bad.wl"
    bad.write_text(BAD, encoding="utf-8")
    for width in (80, 120):
        code, out = in_terminal(width, "validate", "bad.wl", cwd=tmp_path)
        assert code == 1, out
        fits(out, width)
        golden(f"validate.{width}.txt", out)
        lines = out.splitlines()
        for i, line in enumerate(lines):
            if re.fullmatch(r" +\| +\^+", line):  # a caret line: the word above it is the span's
                source = lines[i - 1]
                start = line.index("^")
                word = source[start:start + line.count("^")]
                assert word and " " not in word.strip() and word in LONG_LINE + BAD, (source, line)
    _, out = in_terminal(80, "validate", "bad.wl", "--wide", cwd=tmp_path)
    assert LONG_LINE.rstrip("\n") in out  # --wide: the source line whole


def test_diagnostic_window_and_wrap():
    source = "x" * 60 + " target_key = 1 " + "y" * 60
    col = source.index("target_key") + 1
    d = Diagnostic("E201", "unknown key 'target_key' " + "and a long message " * 5,
                   Span(3, col, 3, col + len("target_key")), "a/b.wl", "did you mean " + "'t', " * 20,
                   source_line=source)
    assert d.render() == d.render(None) and len(d.render().splitlines()) == 4
    for width in (40, 80, 120):
        text = d.render(width)
        fits(text, width)
        src, caret = [line for line in text.splitlines() if line.startswith((" 3 |", "   |"))]
        start = caret.index("^")
        assert src[start:start + caret.count("^")] == "target_key"
        assert ("…" in src) == (len(source) > width - 5)


def test_plot_labels_carry_workload_target_and_run():
    from accelctl.report.entry import entry_from_run
    from accelctl.report.plot import bar_labels
    from accelctl.run.store import load_run

    entries = [entry_from_run(load_run(i, STORE)) for i in ("0001", "0005")]
    assert bar_labels(entries) == ["fixture_train\nsmall · 1 dev\nrun 0001", "fixture_gen\ncpu · 1 dev\nrun 0005"]


def test_fit_helpers_are_quoted_shell_words():
    """fold_command keeps every word quoted as Launch.shell() does (no word of a workload
    reaches the shell unquoted when folded)."""
    from accelctl.contract.plan import Launch
    from accelctl.plan.render import fold_command

    launch = Launch(name="x", argv=["python", "-c", "print('a b; $(rm -rf /)')", "--flag=" + "v" * 90],
                    env={"A": "1 2"}, processes=1)
    folded = fold_command(launch, 40)
    out = subprocess.run(["sh", "-c", "printf '%s\\n' " + folded], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["A=1 2", *launch.argv]
    for line in folded.splitlines():  # a line past the width holds one word that is longer
        assert len(line) <= 40 or len(shlex.split(line.removesuffix(" \\"))) == 1, line
    assert len(folded.splitlines()) == 3
    assert shlex.split(folded.replace("\\\n", "")) == shlex.split(launch.shell())


def _check_lines(text: str, tools: tuple[str, ...]) -> str:
    """The ``# check:`` blocks (each result's line and its messages, as wrapped) of ``tools``."""
    out, keep = [], False
    for line in text.splitlines():
        if line.startswith("# check: "):
            keep = line.startswith(tools)
        elif not line.startswith("#   ") and not line.startswith("#     "):
            keep = False
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 120])
def test_plan_diff_check_and_estimate_fit_the_terminal(width):
    """``plan --diff`` (the plans rendered a column narrower for the diff's marker, a longer line
    folded under its marker), ``plan --check``'s result lines and ``estimate``'s table and prose
    (cost columns left out first, named in a note)."""
    code, out = in_terminal(width, "plan", "workloads/bert_large_pretrain.wl", "-w", "bert_large_phase1_bs32",
                            "--diff", "gaudi1", "gaudi2")
    assert code == 0, out
    fits(out, width)
    golden(f"plan_diff.{width}.txt", out)
    assert "-#   backend gaudi, engine local, device gaudi\n" in out and '+    "kind": "gaudi2",' in out
    code, out = in_terminal(width, "estimate", "workloads/bert_large_pretrain.wl", "-w", "bert_large_phase1_bs32",
                            "-t", "gaudi1", "--no-calibration")
    assert code == 0, out
    fits(out, width)
    golden(f"estimate.{width}.txt", out)
    row = next(line for line in out.splitlines() if line.startswith("  gaudi1  "))
    assert "222 ms" in row and "1,153 samples/s" in row and "compute" in row and "fits" in row
    assert ("left out at this width: usd/h, units/usd" in out) == (width == 80)
    code, out = in_terminal(width, "plan", "workloads/vit_neuron.wl", "-t", "trn1_32xlarge", "--check",
                            "--allow-unavailable")
    assert code == 0, out
    fits(out, width)
    checks = _check_lines(out, ("# check: torchrun parser", "# check: torch-xla 2.9.0 API table"))
    golden(f"plan_check.{width}.txt", checks)
    assert "github:pytorch/xla@v2.9.0" in checks.replace("\n#     ", " ")


@pytest.mark.slow
def test_diff_check_and_estimate_stay_whole_in_a_pipe(capsys, monkeypatch):
    """Not a terminal: the diff, the check lines and the estimate print every line whole, every
    column of the estimate's table included, whatever $COLUMNS says."""
    from accelctl.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    wl = str(ROOT / "workloads" / "bert_large_pretrain.wl")
    assert main(["plan", wl, "-w", "bert_large_phase1_bs32", "--diff", "gaudi1", "gaudi2"]) == 0
    diff = capsys.readouterr().out
    assert max(len(line) for line in diff.splitlines()) > 80
    assert "+#   note: memory per device (real model): weights 221.30 MB + gradients 221.30 MB + optimizer" in diff
    assert main(["estimate", wl, "-w", "bert_large_phase1_bs32", "-t", "gaudi1", "--no-calibration"]) == 0
    est = capsys.readouterr().out
    assert "usd/h  units/usd  job" in est and "left out at this width" not in est
    assert main(["plan", str(ROOT / "workloads" / "vit_neuron.wl"), "-t", "trn1_32xlarge", "--check",
                 "--allow-unavailable"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("# check: torch-xla 2.9.0 API table") and len(line) > 80 for line in out.splitlines())

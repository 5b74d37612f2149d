"""Any input, any size (issue 11 #4): numbers out of range, nesting too deep, huge files
and bad files among good ones are positioned diagnostics, never a traceback; JSON
output is always valid JSON.

Each case is a workload that once raised (OverflowError, ValueError from Python's
4,300-digit limit, RecursionError) or was accepted and broke later (``micro`` of 400
digits in the memory estimate, ``lr = 1e309`` printed as ``Infinity``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from accelctl import cli
from accelctl.api import plan, render_plan, validate, validate_text
from accelctl.dsl import parser, source
from accelctl.plan.render import FORMATS
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
BASE = "workload w {\n  task pretrain { }\n  model bert()\n  %s\n  target cpu { }\n}\n"
BIG = "9" * 5000
DEEP = 3000


def _strict_json(text: str):
    """json.loads that refuses NaN/Infinity (not JSON, though Python writes them)."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# (id, the line added to BASE, the code expected, the text the diagnostic points at)
CASES = [
    ("float-inf", "optimizer adamw(lr = 1e309)", "E003", "1e309"),
    ("negative-inf", "optimizer adamw(weight_decay = -1e400)", "E003", "-1e400"),
    ("int-over-4300-digits", f"seed = {BIG}", "E003", BIG),
    ("huge-int-in-float-field", f"optimizer adamw(lr = {'9' * 400})", "E304", "9" * 400),
    ("huge-int-in-int-field", f"batch {{ micro = {'9' * 400} }}", "E304", "9" * 400),
    ("micro-beyond-range", "batch { micro = 10_000_000_000 }", "E304", "10_000_000_000"),
    ("quantity-overflows", "target big { device = cpu  memory = 1e300 TB }", "E304", "1e300 TB"),
    ("nested-lists", "description = " + "[" * DEEP + "]" * DEEP, "E005", "["),
    ("nested-calls", "description = " + "f(" * DEEP + ")" * DEEP, "E005", "f("),
    ("nested-blocks", "measure { " + "x { " * DEEP + "}" * DEEP + " }", "E005", "{"),
    ("nested-unclosed", "description = " + "[" * DEEP, "E005", "["),
]


@pytest.mark.parametrize("line,code,points_at", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_out_of_range_input_is_a_positioned_diagnostic(line, code, points_at):
    text = BASE % line
    specs, diags = validate_text(text, "w.wl")
    errors = [d for d in diags if d.severity == "error"]
    assert errors, f"accepted: {line[:60]}"
    d = errors[0]
    assert d.code == code, d.render()[:300]
    assert d.span is not None
    lines = text.splitlines()
    assert 1 <= d.span.line <= len(lines)
    src = lines[d.span.line - 1]
    assert src[d.span.column - 1:].startswith(points_at), (d.span, src[:80])


def test_every_numeric_field_has_a_finite_upper_bound():
    """A field without an upper bound let ``micro = <400 digits>`` through to an OverflowError."""
    from accelctl.language import schema as S
    from accelctl.language import values as V

    tables = {"task": {k: t for k, (t, _) in S.TASK_KEYS.items()}, "dataset": S.DATASET_KEYS, "fp8": S.FP8_KEYS,
              "batch": S.BATCH_KEYS, "optimizer": S.OPTIMIZER_KEYS, "measure": S.MEASURE_KEYS,
              "target": S.TARGET_KEYS, "parallel": S.PARALLEL_ARGS, "workload": S.WORKLOAD_KEYS,
              **{f"engine {k}": t for k, t in S.ENGINE_KEYS.items()}}
    from accelctl.dsl import ast
    from accelctl.errors import Span

    huge = ast.Num(10**400, "1" + "0" * 400, Span.point(1, 1))
    unbounded = []
    for where, table in tables.items():
        for key, vtype in table.items():
            if vtype.name not in ("whole number", "number"):
                continue
            ctx = V.Ctx("x.wl")
            if vtype.coerce(huge, ctx, key) is not V.BAD or not ctx.diags:
                unbounded.append(f"{where}.{key}")
    assert unbounded == []


def test_lr_1e308_plans_and_json_is_valid():
    """The largest finite literal is refused by the range check, and JSON output never holds Infinity."""
    _, diags = validate_text(BASE % "optimizer adamw(lr = 1e308)", "w.wl")
    assert [d.code for d in diags if d.severity == "error"] == ["E304"]
    specs, diags = validate_text(BASE % "optimizer adamw(lr = 5.0)", "w.wl")
    (spec,) = specs
    p = plan(spec, "cpu")
    assert _strict_json(render_plan(p, "json"))["job"]["optimizer"]["lr"] == 5.0


def test_render_json_refuses_a_non_finite_value():
    """A non-finite number that got past the check is an error, not ``Infinity`` in the output."""

    specs, _ = validate_text(BASE % "optimizer adamw(lr = 5.0)", "w.wl")
    p = plan(specs[0], "cpu")
    bad = replace(p, job=replace(p.job, optimizer=replace(
        p.job.optimizer, lr=float("inf"))))
    with pytest.raises(ValueError):
        render_plan(bad, "json")
    assert set(FORMATS) == {"text", "json", "sh"}


def test_one_bad_file_never_hides_another(tmp_path, capsys):
    good = ROOT / "workloads" / "tiny_gpt2.wl"
    files = []
    for i, (_, line, _, _) in enumerate(CASES):
        f = tmp_path / f"bad{i}.wl"
        f.write_text(BASE % line)
        files.append(f)
    missing = tmp_path / "missing.wl"
    rc = cli.main(["validate", "--json", str(files[0]), str(missing), *map(str, files[1:]), str(good)])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert rc == 1 and not report["ok"]
    by_path = {r["path"]: r for r in report["result"]["files"]}
    assert len(by_path) == len(files) + 2
    assert by_path[str(good)]["ok"] and by_path[str(good)]["workloads"]
    for f, (_, _, code, _) in zip(files, CASES):
        diags = by_path[str(f)]["diagnostics"]
        assert diags and diags[0]["code"] == code and "line" in diags[0]
    assert by_path[str(missing)]["diagnostics"][0]["code"] == "E001"


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "MAX_SOURCE_BYTES", 1000)
    f = tmp_path / "big.wl"
    f.write_text(BASE % ("# " + "x" * 2000))
    _, diags = validate(f)
    assert [d.code for d in diags] == ["E004"]
    assert diags[0].span is not None and (diags[0].span.line, diags[0].span.column) == (1, 1)
    assert "1,000 bytes" in diags[0].message
    _, diags = validate_text(BASE % ("# " + "x" * 2000), "big.wl")
    assert [d.code for d in diags] == ["E004"]


def test_the_size_limit_is_1_mib_and_counts_bytes_not_characters():
    """1 MiB (issue 28): 200 times the largest shipped workload; a text of as many characters
    is over it when they take more than a byte each."""
    assert source.MAX_SOURCE_BYTES == parser.MAX_SOURCE_BYTES == 2**20
    text = BASE % f'description = "{"é" * (2**19 + 10)}"'
    assert len(text) < 2**20 < len(text.encode("utf-8"))
    _, diags = validate_text(text, "wide.wl")
    assert [d.code for d in diags] == ["E004"]


def _workloads(n: int) -> str:
    src = (ROOT / "workloads" / "tiny_gpt2.wl").read_text()
    return "".join(src.replace("workload tiny_gpt2_", f"workload w{i}_") for i in range(n))


def test_validation_time_grows_linearly():
    """4x the input takes well under 8x the time (a quadratic pass would take 16x).  The
    figures for 1 MB and 5 MB are in bench/validate_scaling.py."""
    small, large = _workloads(60), _workloads(240)
    best = {}
    for name, text in (("small", small), ("large", large)):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            specs, diags = validate_text(text, "big.wl")
            times.append(time.perf_counter() - t0)
        assert not [d for d in diags if d.severity == "error"]
        best[name] = min(times)
    assert best["large"] < 8 * best["small"], best


def test_a_bug_on_one_file_is_that_files_diagnostic(tmp_path, capsys, monkeypatch):
    """Whatever goes wrong inside on one file (here a check that raises), validate reports
    it as E009 for that file and goes on with the others; the JSON report is complete."""
    import accelctl.api as api

    real = api.check_all

    def broken_on_bad(file):
        if file.path.endswith("bad.wl"):
            raise RecursionError("maximum recursion depth exceeded")
        return real(file)

    monkeypatch.setattr(api, "check_all", broken_on_bad)
    good, bad = ROOT / "workloads" / "tiny_gpt2.wl", tmp_path / "bad.wl"
    bad.write_text(BASE % "seed = 1")
    rc = cli.main(["validate", "--json", str(bad), str(good)])
    report = json.loads(capsys.readouterr().out)["result"]
    assert rc == 1 and [r["ok"] for r in report["files"]] == [False, True]
    (d,) = report["files"][0]["diagnostics"]
    assert d["code"] == "E009" and d["line"] == 1 and "RecursionError" in d["message"]

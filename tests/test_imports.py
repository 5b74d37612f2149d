"""`accelctl validate` stays light: no torch, deepspeed or textual, and few modules when cold.

Both checks run the real command in a fresh interpreter (a subprocess), so nothing
this test process has already imported can hide an import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workloads").glob("*.wl"))
HEAVY = ("torch", "deepspeed", "textual")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONSTARTUP", None)
    env["ACCELCTL_PARSE_CACHE"] = "off"  # every text parsed by lark: the most a command imports
    return env


def _is_heavy(module: str) -> bool:
    return any(module == h or module.startswith(h + ".") for h in HEAVY)


def test_validate_imports_no_heavy_module_importtime():
    """`python -X importtime -m accelctl.cli validate workloads/*.wl` lists every import it made."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "accelctl.cli", "validate", *WORKLOADS],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    imported = [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line]
    assert "accelctl.language.check" in imported and "accelctl.dsl.lalr" in imported  # the log is what we think
    heavy = sorted({m for m in imported if _is_heavy(m)})
    assert not heavy, f"validate imported {heavy}"


def test_validate_leaves_heavy_modules_out_of_sys_modules():
    code = (
        "import json, sys\n"
        "from accelctl.cli import main\n"
        f"rc = main(['validate', *{WORKLOADS!r}])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(json.dumps({'rc': rc, 'heavy': heavy}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=120)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"rc": 0, "heavy": []}, proc.stderr


def test_validate_of_parses_read_back_from_the_cache_imports_no_lark(tmp_path):
    """With every file's parse in the parsed-workload cache (``accelctl.dsl.parse_cache``), cold
    ``validate`` imports neither lark nor ``regex``, and nothing the same command with every
    file parsed did not."""
    env = dict(_env(), ACCELCTL_PARSE_CACHE=str(tmp_path))
    code = (f"from accelctl.cli import main\nimport contextlib, io\n"
            f"with contextlib.redirect_stdout(io.StringIO()): assert main(['validate', *{WORKLOADS!r}]) == 0\n"
            "import json, sys; print(json.dumps(sorted(sys.modules)))")
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    parsed, read_back = (set(json.loads(r.stdout.strip().splitlines()[-1])) for r in runs)
    assert {"lark", "regex", "accelctl.dsl.lalr"} <= parsed  # the first run parsed every file
    assert not {m.split(".")[0] for m in read_back} & {"lark", "regex"}
    assert "accelctl.dsl.lalr" not in read_back
    assert "traceback" not in read_back  # the crash handler's (accelctl.cli); lark's logging imports it on a parse
    assert read_back <= parsed, sorted(read_back - parsed)


#: modules a cold command may load past ``import lark`` (measured on b541a0a: validate of every
#: workload 98, estimate 74, of which accelctl's own 80 and 64): a guard against a command that
#: starts pulling in a package tree (rich alone is ~50 modules, email + http.client ~35), not a target
MODULE_BUDGET = 150
#: estimate plans every target first, as validate does (one verdict), then estimates: validate's
#: modules and its own ~20 (the roofline, its factors, calibration and rendering)
ESTIMATE_MODULE_BUDGET = MODULE_BUDGET + 20
#: past the standard library: accelctl, and the library of its value types (``accelctl.frozen``)
#: with what that imports itself
VALUE_PACKAGES = {"accelctl", "msgspec", "typing_extensions"}


def _cold_command_modules(verb: str) -> tuple[set[str], set[str]]:
    """The modules a fresh interpreter loads running ``accelctl VERB workloads/*.wl`` (the
    command must succeed), and those of ``import lark`` alone: its floor (the interpreter's
    start, lark, the one parser, and ``regex``, which lark imports itself where installed)."""
    floor = _modules_after("import lark")
    loaded = _modules_after(f"from accelctl.cli import main\nimport contextlib, io\n"
                            f"with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):"
                            f" assert main([{verb!r}, *{WORKLOADS!r}]) == 0")
    return loaded, floor


def _packages_past_the_floor(loaded: set[str], floor: set[str]) -> set[str]:
    """The top-level packages of what the command loaded past the floor, but the standard library's."""
    return {m.split(".")[0] for m in loaded - floor} - set(sys.stdlib_module_names)


def test_cold_validate_loads_the_standard_library_lark_and_accelctl_only():
    """What keeps cold ``validate`` light, as modules rather than seconds (its time is the bench's,
    bench/comparisons/cli_*.py): past ``import lark``, nothing but accelctl and the standard
    library, and a bounded number of modules."""
    loaded, floor = _cold_command_modules("validate")
    assert "accelctl.language.check" in loaded and "accelctl.dsl.lalr" in loaded  # it validated
    assert _packages_past_the_floor(loaded, floor) == VALUE_PACKAGES
    assert len(loaded - floor) <= MODULE_BUDGET, sorted(loaded - floor)


def test_cold_estimate_loads_the_standard_library_lark_and_accelctl_only():
    """``accelctl estimate workloads/*.wl``: every target of every file, no torch, no rich, no scipy."""
    loaded, floor = _cold_command_modules("estimate")
    assert "accelctl.estimate.render" in loaded and "accelctl.plan.compile" in loaded  # it planned, it estimated
    assert _packages_past_the_floor(loaded, floor) == VALUE_PACKAGES
    assert len(loaded - floor) <= ESTIMATE_MODULE_BUDGET, sorted(loaded - floor)


def test_sweep_estimate_pick_and_fit_import_no_heavy_module():
    """``sweep --over ... --estimate``, ``pick`` and ``fit`` (no probe) decide from the estimate
    and the memory model alone: no torch, deepspeed or textual in a fresh interpreter."""
    vit, bert = "workloads/vit_fp8.wl", "workloads/bert_1_5b_zero1.wl"
    commands = [["sweep", vit, "--over", "batch.micro=8,16", "--over", "precision=bf16,fp8", "--estimate", "--csv"],
                ["pick", bert, "-w", "bert_1_5b_zero1_8n", "--work", "1e8 samples", "--deadline", "24 h", "-f", "csv"],
                ["fit", "workloads/t5_3b_summarization.wl", "-t", "gaudi2"]]
    code = (
        "import contextlib, io, json, sys\n"
        "from accelctl.cli import main\n"
        f"rcs = []\nfor c in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "        rcs.append(main(c))\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(json.dumps({'rc': rcs, 'heavy': heavy}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=300)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"rc": [0, 0, 0], "heavy": []}, proc.stderr


#: what ``validate`` may load of accelctl: the CLI (its own verb's module alone: the other verbs'
#: parsers are built, and their modules imported, only when named, ``accelctl.cli.build_parser``), the
#: parser and the checker; planning, the plan contract, backends, engines, the runner and the
#: statistics load only for the verbs that use them
VALIDATE_MAY_IMPORT = ("accelctl", "accelctl.api", "accelctl.cli", "accelctl.errors", "accelctl.hostinfo",
                       "accelctl.exitcodes", "accelctl.entrypoints", "accelctl.reply", "accelctl.dsl", "accelctl.language",
                       "accelctl.workload", "accelctl.models", "accelctl.catalog",
                       "accelctl.cli.help", "accelctl.cli.parser", "accelctl.cli.common", "accelctl.cli.check",
                       "accelctl.frozen", "accelctl.private_files")

def _modules_after(code: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_validate_loads_no_more_modules_than_plan():
    """A bound on what cold ``validate`` imports, as a module set: lark (the one parser) but no
    rich; of accelctl, the checker and -- since issue 23's one verdict, where validate plans
    every target to report plan's refusals at their lines -- the planning layers (plan,
    backends, engines, contract, families), no run, report beyond its CLI, or TUI; in all, no more modules
    than a cold ``plan`` of the same files.  (Before issue 23 the bound was the ``import lark,
    rich`` floor.)"""
    loaded = _modules_after(f"from accelctl.cli import main\nimport contextlib, io\n"
                            f"with contextlib.redirect_stdout(io.StringIO()): assert main(['validate', *{WORKLOADS!r}]) == 0")
    planned = set()
    for wl in WORKLOADS:
        planned |= _modules_after(f"from accelctl.cli import main\nimport contextlib, io\n"
                                  f"with contextlib.redirect_stdout(io.StringIO()): main(['plan', {wl!r}])")
    ours = sorted(m for m in loaded if m.split(".")[0] == "accelctl")
    outside = [m for m in ours if not (m in VALIDATE_MAY_IMPORT or m.startswith(
        ("accelctl.dsl.", "accelctl.language.", "accelctl.workload.", "accelctl.models.", "accelctl.plan", "accelctl.backends", "accelctl.engines",
         "accelctl.contract", "accelctl.families")))]
    assert not outside, f"validate imported {outside}"
    assert "accelctl.dsl.lalr" in loaded
    assert not {m.split(".")[0] for m in loaded} & {"rich", "statistics"}
    assert loaded - {"accelctl.plan.verdict"} <= planned, sorted(loaded - planned)


#: what validate's verdict (every target planned, ``accelctl.plan.verdict``) does not need: ``plan
#: --check``'s result type, the rehearsal modules, and selecting a target by name
VERDICT_MUST_NOT_IMPORT = ("accelctl.backends.findings", "accelctl.plan.rehearse", "accelctl.plan.rehearsal_size",
                           "accelctl.plan.select")


def test_validate_plans_every_target_without_what_only_checks_and_rehearsals_need():
    loaded = _cli_modules("validate", *WORKLOADS)
    assert {"accelctl.plan.verdict", "accelctl.engines.aws_batch", "accelctl.backends.te_fp8.backend"} <= loaded
    assert not _forbidden(loaded, VERDICT_MUST_NOT_IMPORT)


#: what no cold ``plan`` (text, json, sh) or ``estimate`` of the cpu bench workload imports (issue 12:
#: cold plan against the ``import lark, rich`` floor): the engines that reach past this machine
#: (their socket/subprocess/threading), the backends after the one that selects the target, the
#: checks' result type, the width fitting of a pipe, and what only writing a file needs
#: (tempfile/random for an atomic calibration store, secrets/hashlib for a run id, ctypes for
#: the parent-death signal).  Not listed: lark (the one parser, in the floor) and what it imports
#: itself (threading, tempfile, random, hashlib), nor ``platform``, which msgspec's uuid support
#: imports
PLAN_MUST_NOT_IMPORT = ("accelctl.engines.slurm", "accelctl.engines.slurm_agents", "accelctl.engines.kubernetes",
                        "accelctl.engines.aws_batch", "accelctl.engines.batch_entrypoint", "accelctl.engines.torchrun",
                        "accelctl.backends.gaudi", "accelctl.backends.xla_neuron", "accelctl.backends.te_fp8",
                        "accelctl.backends.deepspeed", "accelctl.backends.torchrun", "accelctl.backends.findings",
                        "accelctl.report.width", "accelctl.run", "rich", "socket", "subprocess", "secrets", "ctypes")
CPU_WORKLOAD = "bench/workloads/bert_mlm.wl"  # the file bench/comparisons/cli_plan.py times


def _forbidden(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in names))


def _cli_modules(*argv: str) -> set[str]:
    return _modules_after(f"from accelctl.cli import main\nimport contextlib, io\n"
                          f"with contextlib.redirect_stdout(io.StringIO()): assert main({list(argv)!r}) == 0")


def test_cold_plan_imports_only_the_plug_ins_it_uses():
    for fmt in ("text", "json", "sh"):
        loaded = _cli_modules("plan", "-f", fmt, CPU_WORKLOAD)
        assert {"accelctl.plan.compile", "accelctl.backends.cpu", "accelctl.engines.base"} <= loaded  # it planned
        assert not _forbidden(loaded, PLAN_MUST_NOT_IMPORT), fmt


def test_cold_estimate_reads_the_run_store_path_without_what_writing_a_run_needs():
    loaded = _cli_modules("estimate", CPU_WORKLOAD)
    assert "accelctl.estimate.render" in loaded
    allowed_run = ("accelctl.run", "accelctl.run.store")  # runs_root(): where a stored calibration lives
    assert not [m for m in _forbidden(loaded, PLAN_MUST_NOT_IMPORT) if m not in allowed_run]


def test_the_plug_in_tables_still_load_every_plug_in_on_demand():
    """The lazy registry is the same table: every name, in order, each object of its class."""
    loaded = _modules_after("from accelctl.plan.registry import BACKENDS, ENGINES\n"
                            "from accelctl.language import plugins\n"
                            "assert list(BACKENDS) == list(plugins.BACKENDS) and list(ENGINES) == list(plugins.ENGINES)\n"
                            "assert 'slurm' in ENGINES and ENGINES.get('no such engine') is None\n"
                            "assert [b.name for b in BACKENDS.values()] == list(plugins.BACKENDS)\n"
                            "assert ENGINES['slurm'].name == 'slurm'")
    assert {"accelctl.backends.gaudi.backend", "accelctl.engines.slurm"} <= loaded


#: what cold ``validate`` never uses, though the modules it plans with are imported: the AWS
#: Batch node's sockets and child process (``engines.batch_entrypoint``: planning needs only its
#: argv helpers), and difflib (a misspelt name's hint: ``errors.did_you_mean``); their imports
#: cost ~10 % of the command's instructions past the ``import lark, rich`` floor (docs/bench.md)
VALIDATE_MUST_NOT_IMPORT = ("socket", "subprocess", "selectors", "difflib")


def test_cold_validate_leaves_sockets_child_processes_and_difflib_out():
    loaded, _ = _cold_command_modules("validate")
    assert "accelctl.engines.batch_entrypoint" in loaded  # it planned an AWS Batch target
    assert not _forbidden(loaded, VALIDATE_MUST_NOT_IMPORT), _forbidden(loaded, VALIDATE_MUST_NOT_IMPORT)

"""Shell completion (accelctl.cli.completion): the generated scripts run in the real shells.

bash: the script is sourced in ``bash -c`` and its function called with ``COMP_WORDS`` /
``COMP_CWORD`` set, as bash's completion does; the names come from the real
``accelctl __complete`` (an ``accelctl`` on PATH that runs this checkout).  fish: ``complete
-C``, fish's own completion engine, on the sourced script.  zsh: the script through zsh's
``bashcompinit`` (its ``compgen -F``).  fish and zsh tests skip where the shell is not
installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import validate
from accelctl.cli import main

ROOT = Path(__file__).resolve().parents[1]
STORE = "tests/report/fixtures/store"
SCALING = "workloads/bert_large_scaling.wl"
RUN_IDS = sorted((p.name for p in (ROOT / STORE).iterdir() if p.is_dir()), reverse=True)
#: the same ids as the runs/report tables show them (the store resolves them)
SHORT_IDS = [i[-4:] for i in RUN_IDS]


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory):
    """PATH with an ``accelctl`` that runs this checkout, and the three scripts written out."""
    tmp = tmp_path_factory.mktemp("completion")
    exe = tmp / "bin" / "accelctl"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m accelctl.cli \"$@\"\n")
    exe.chmod(0o755)
    scripts = {}
    for shell in ("bash", "zsh", "fish"):
        out = subprocess.run([str(exe), "completion", shell], capture_output=True, text=True, check=True)
        scripts[shell] = tmp / f"accelctl.{shell}"
        scripts[shell].write_text(out.stdout)
    env = dict(os.environ, PATH=f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("ACCELCTL_RUNS_DIR", None)
    return env, scripts


def bash_complete(shell_env, words: list[str], cword: int | None = None) -> list[str]:
    env, scripts = shell_env
    cword = len(words) - 1 if cword is None else cword
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    code = (f"source {scripts['bash']}; COMP_WORDS=({quoted}); COMP_CWORD={cword}; _accelctl; "
            'printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "--norc", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return [line for line in out.stdout.splitlines() if line]


def targets_of(path: str) -> list[str]:
    specs, diags = validate(ROOT / path)
    assert not [d for d in diags if d.severity == "error"]
    return list(dict.fromkeys(t.name for s in specs for t in s.targets))


def test_bash_completes_subcommands_options_and_choices(shell_env):
    assert bash_complete(shell_env, ["accelctl", ""])[:4] == ["validate", "plan", "estimate", "run"]
    assert bash_complete(shell_env, ["accelctl", "co"]) == ["compare", "completion"]
    assert bash_complete(shell_env, ["accelctl", "plan", SCALING, "--ta"]) == ["--target"]
    assert set(bash_complete(shell_env, ["accelctl", "report", "--w"])) == {"--workload", "--wandb", "--wandb-dir",
                                                                          "--wide"}
    assert bash_complete(shell_env, ["accelctl", "plan", SCALING, "-f", ""]) == ["text", "json", "sh"]
    assert bash_complete(shell_env, ["accelctl", "completion", ""]) == ["bash", "zsh", "fish"]
    assert bash_complete(shell_env, ["accelctl", "plan", "workloads/ddp_c"]) == ["workloads/ddp_cpu.wl"]


def test_bash_completes_targets_and_workloads_from_the_file_given(shell_env):
    expected = targets_of(SCALING)
    assert len(expected) >= 3
    assert bash_complete(shell_env, ["accelctl", "plan", SCALING, "-t", ""]) == expected
    assert bash_complete(shell_env, ["accelctl", "run", SCALING, "--target", "dl1_"]) == [
        t for t in expected if t.startswith("dl1_")]
    # the file after the cursor counts too, and the option values before it are skipped
    assert bash_complete(shell_env, ["accelctl", "plan", "-e", "local", "-t", "", SCALING], cword=5) == expected
    assert bash_complete(shell_env, ["accelctl", "plan", "workloads/ddp_cpu.wl", "-w", ""]) == ["ddp_cpu", "zero2_cpu"]
    assert bash_complete(shell_env, ["accelctl", "doctor", "--plan", SCALING, "-t", ""]) == expected
    # no FILE on the line, or one that does not exist: nothing
    assert bash_complete(shell_env, ["accelctl", "plan", "-t", ""]) == []
    assert bash_complete(shell_env, ["accelctl", "plan", "no/such.wl", "-t", ""]) == []


def test_bash_completes_run_ids_from_the_store(shell_env):
    """Short ids, as the tables show them; a full id typed (no short one matches) completes
    among the full ids."""
    assert bash_complete(shell_env, ["accelctl", "report", "--runs-dir", STORE, ""]) == SHORT_IDS
    assert bash_complete(shell_env, ["accelctl", "report", "--runs-dir", STORE, "000"]) == SHORT_IDS
    assert bash_complete(shell_env, ["accelctl", "compare", "--runs-dir", STORE, SHORT_IDS[0], "0002"]) == ["0002"]
    assert bash_complete(shell_env, ["accelctl", "compare", "--runs-dir", STORE, RUN_IDS[0], "20260101-0001"]) == [
        "20260101-000100-fixture_train-big-0002"]
    assert bash_complete(shell_env, ["accelctl", "run", "--resume", "", "--runs-dir", STORE], cword=3) == SHORT_IDS
    assert bash_complete(shell_env, ["accelctl", "report", f"--runs-dir={STORE}", "2026"]) == RUN_IDS
    assert bash_complete(shell_env, ["accelctl", "report", "--runs-dir", "/no/such/store", ""]) == []


@pytest.mark.parametrize("content", [
    b"workload a {\n  target x { devices = 1 }\n  target \"y z\" {",  # a syntax error
    bytes(range(256)) * 4,  # not UTF-8
    b"",
])
def test_complete_never_fails_on_a_bad_file(tmp_path, capfd, content):
    bad = tmp_path / "bad.wl"
    bad.write_bytes(content)
    for kind in ("targets", "workloads"):
        assert main(["__complete", kind, str(bad)]) == 0
    assert main(["__complete", "targets", str(tmp_path)]) == 0  # a folder
    assert main(["__complete", "nonsense"]) == 0 and main(["__complete"]) == 0
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_complete_offers_the_names_of_a_file_that_does_not_check(tmp_path, capsys):
    """A workload with an error (an unknown key) still parses: its names are offered."""
    wl = tmp_path / "half.wl"
    wl.write_text("workload a {\n  task pretrain\n  target x { devicez = 1 }\n  target y { }\n}\n")
    assert main(["__complete", "targets", str(wl)]) == 0
    assert capsys.readouterr().out.split() == ["x", "y"]
    assert main(["__complete", "workloads", str(wl)]) == 0
    assert capsys.readouterr().out.split() == ["a"]


def test_complete_is_light():
    """A cold ``__complete`` loads neither torch nor rich (what keeps it well under a second:
    its latency is measured in the README, not bounded here -- speed goals live in bench/)."""
    code = ("import sys, time\nfrom accelctl.cli import main\n"
            f"main(['__complete', 'targets', {str(ROOT / SCALING)!r}])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'rich', 'textual', 'matplotlib'}))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"
    assert out.stdout.splitlines()[:-1] == targets_of(SCALING)


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed: the fish check is NOT RUN")
def test_fish_completes_with_its_own_engine(shell_env):
    env, scripts = shell_env

    def fish(line: str) -> list[str]:
        out = subprocess.run(["fish", "--no-config", "-c", f"source {scripts['fish']}; complete -C {line!r}"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        return [c.split("\t")[0] for c in out.stdout.splitlines()]

    assert subprocess.run(["fish", "--no-execute", str(scripts["fish"])], capture_output=True).returncode == 0
    assert "plan" in fish("accelctl pl") and "completion" in fish("accelctl ")
    assert sorted(fish(f"accelctl plan {SCALING} -t ")) == sorted(targets_of(SCALING))
    assert fish("accelctl plan workloads/ddp_cpu.wl -w ") == ["ddp_cpu", "zero2_cpu"]
    assert fish(f"accelctl plan {SCALING} --ta") == ["--target"]
    assert sorted(fish(f"accelctl run --runs-dir {STORE} --resume ")) == sorted(SHORT_IDS)
    assert fish("accelctl completion ") == ["bash", "fish", "zsh"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed: the zsh check is NOT RUN")
def test_zsh_runs_the_function_through_bashcompinit(shell_env):
    """zsh's bashcompinit ``compgen -F`` (what zsh calls on Tab) returns the candidates; zsh
    itself then filters them by the typed prefix, so options come unfiltered here."""
    env, scripts = shell_env

    def zsh(words: list[str]) -> list[str]:
        quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
        code = (f"source {scripts['zsh']}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
                f"compgen -F _accelctl -- {words[-1]!r}")
        out = subprocess.run(["zsh", "-f", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        return [line for line in out.stdout.splitlines() if line]

    assert subprocess.run(["zsh", "-n", str(scripts["zsh"])], capture_output=True).returncode == 0
    assert zsh(["accelctl", "plan", SCALING, "-t", ""]) == targets_of(SCALING)
    assert zsh(["accelctl", "plan", "workloads/ddp_cpu.wl", "-w", ""]) == ["ddp_cpu", "zero2_cpu"]
    assert "--target" in zsh(["accelctl", "plan", SCALING, "--ta"])
    assert zsh(["accelctl", "report", "--runs-dir", STORE, ""]) == SHORT_IDS

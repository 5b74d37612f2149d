"""``plan --format sh``: nothing a value holds leaves its quoting (issue 11 #2b).

The script once wrote each generated file through a heredoc ending at a line
``ACCELCTL_EOF``; a host name holding that line closed it and the next line ran.  Here
hostile values are put into every generated file, the job and a launch of real plans
(every shipped workload, every target that plans), and the script runs under bash AND
dash in a temporary folder: no payload may run, and every file must come out byte for
byte as the runner writes it (``{run_dir}``/``{free_port}`` filled in).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from accelctl.api import load, plan, render_plan_sh
from accelctl.contract.plan import FREE_PORT, GeneratedFile, Launch
from accelctl.errors import AccelctlError
from accelctl.run.store import job_for_run, substitute
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
SHELLS = [s for s in ("bash", "dash") if shutil.which(s)]
PORT = "29999"


def payloads(mark: Path) -> list[str]:
    m = str(mark)
    return [
        f"localhost\nACCELCTL_EOF\ntouch {m}\n: <<'ACCELCTL_EOF'",   # the issue's host name
        f"x\nACCELCTL_EOF\ntouch {m}.2\n",
        f"'; touch {m}; '", f'"; touch {m}; "', f"$(touch {m})", f"`touch {m}`", f"\\'$(touch {m})\\'",
        f"${{IFS}}touch${{IFS}}{m}", f";touch {m}&", f"|| touch {m}", f"\r\ntouch {m}\r\n", f"!(touch {m})",
        "%s%n%b\\n\\c", "-n", "--", "-e", "", "\n\n", "trailing newline\n", "no newline", "ünïcödé ☃ \t tab",
        "{run_dir}/x:{free_port}", "'", "''", "\\", "EOF", "ACCELCTL_EOF",
    ]


def _plans():
    out = []
    for wl in sorted((ROOT / "workloads").glob("*.wl")):
        for spec in load(wl):
            for t in spec.targets:
                try:
                    out.append(plan(spec, t))
                except AccelctlError:
                    continue  # a target this machine's catalog refuses: its own tests cover it
    return out


PLANS = _plans()


def _hostile(p, evil: list[str]):
    """``p`` with every payload in every generated file and the job, and a launch whose
    argv and environment hold them and record the argv it got."""
    files = tuple(replace(f, content=f.content + "".join(evil)) for f in p.files)
    files += (GeneratedFile("payloads.txt", "\x1e".join(evil), executable=True),
              GeneratedFile("sub dir/$(touch x)/f.txt", evil[0]))
    record = 'for a in "$@"; do printf "%s\\036" "$a"; done > "$RUN_DIR/argv.out"'
    probe = Launch("probe", ("sh", "-c", record, "sh", *evil), env={"EVIL": evil[0], "EVIL2": evil[3]})
    job = replace(p.job, task=replace(p.job.task, prompt="".join(evil)))
    return replace(p, files=files, job=job, launches=(probe,))


def test_there_are_plans_with_generated_files():
    assert len(PLANS) >= 10 and sum(len(p.files) for p in PLANS) >= 10
    assert {f.path for p in PLANS for f in p.files} >= {"ds_config.json"}


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_values_run_nothing_and_files_come_out_byte_exact(tmp_path, shell):
    mark = tmp_path / "pwned"
    evil = payloads(mark)
    for i, p in enumerate(PLANS):
        hp = _hostile(p, evil)
        script = tmp_path / f"plan{i}.sh"
        script.write_text(render_plan_sh(hp), encoding="utf-8")
        rd = tmp_path / f"rd{i}"
        env = {"PATH": "/usr/bin:/bin", "RUN_DIR": str(rd), "FREE_PORT": PORT}
        r = subprocess.run([shell, str(script)], cwd=tmp_path, env=env, capture_output=True, timeout=60)
        assert r.returncode == 0, (p.workload, p.target, r.stderr[-2000:])
        assert not list(tmp_path.glob("pwned*")), f"a payload ran: {p.workload} -> {p.target}"
        for f in hp.files:
            want = substitute(f.content, rd, {FREE_PORT: PORT}) if f.template else f.content  # data as planned
            assert (rd / f.path).read_bytes() == want.encode("utf-8"), (p.workload, p.target, f.path)
        assert (rd / "payloads.txt").stat().st_mode & 0o100
        # a scheduler's job as the runner writes it (events into the run folder), else the plan's
        job = job_for_run(hp.job, rd) if hp.request is not None else hp.job
        assert (rd / "job.json").read_bytes() == job.to_json().encode()
        got = (rd / "argv.out").read_bytes().decode("utf-8").split("\x1e")[:-1]
        assert got == [substitute(a, rd, {FREE_PORT: PORT}) for a in evil]


def test_no_heredoc_in_the_script():
    for p in PLANS:
        sh = render_plan_sh(_hostile(p, ["a", "b", "c", "d"]))
        assert "<<" not in sh


def test_the_issues_host_name_is_refused_where_written():
    from accelctl.api import validate_text

    text = ('workload w {\n  task pretrain { }\n  model bert()\n'
            '  engine deepspeed { hosts = ["localhost\\nACCELCTL_EOF\\ntouch /tmp/x\\n: <<\'ACCELCTL_EOF\'"] }\n'
            '  target cpu { }\n}\n')
    _, diags = validate_text(text, "w.wl")
    assert [(d.code, d.span.line, d.span.column) for d in diags if d.severity == "error"] == [("E215", 4, 31)]

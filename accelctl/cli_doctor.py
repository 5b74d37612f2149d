"""``accelctl doctor``'s text: the host first (at once), the probes as they finish (a counter on
a terminal's stderr: torch's import takes seconds), then the extras installed and what this
machine can do with each target of the files named (issue 27: doctor printed nothing for 13 s,
then did not say which targets could run here or which extras were installed)."""

from __future__ import annotations

import shutil
import sys
import textwrap


def out(line: str) -> None:
    """A line of the report, folded at spaces to the terminal's width under its own indent (issue
    27: doctor's lines ran past 80 columns); whole in a pipe."""
    if not sys.stdout.isatty():
        print(line)
        return
    width = shutil.get_terminal_size((100, 24)).columns
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    print("\n".join(textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False)) or line)


def print_doctor(host: dict, run_probes, extras: list[dict], targets: list[dict], color) -> None:
    out(f"cpu: {host['cpu']} ({host['cores']} cores), native bf16: {'yes' if host['native_bf16'] else 'no'}"
          + (f" ({', '.join(host['bf16_flags'])})" if host["bf16_flags"] else ""))
    out(f"precision: {host['bf16_advice']}")
    out("device adapters present: " + ", ".join(f"{k} ({v})" for k, v in host["adapters_present"].items()))
    out("C++ compiler (optimize { compile = on } on the CPU): "
          + (host["cxx_compiler"] or "none: torch.compile cannot build CPU kernels here (install g++)"))
    sys.stdout.flush()  # the host at once: the probes take seconds
    live = sys.stderr.isatty()

    def progress(done: int, total: int, probe) -> None:
        if live:
            end = "\n" if done == total else ""
            sys.stderr.write(f"\r\x1b[Kprobing the stacks, each in its own interpreter: {done}/{total} ({probe.name})"
                             + end)
            sys.stderr.flush()

    if live:
        sys.stderr.write("probing the stacks, each in its own interpreter...")
        sys.stderr.flush()
    for p in run_probes(progress=progress):
        state = color("ok", "32", sys.stdout) if p.ok else color("absent", "33", sys.stdout)
        detail = ", ".join(f"{k}={v}" for k, v in p.facts.items()) if p.ok else p.error
        out(f"  {p.name:<20} {state:<6} {detail}")
    out("extras (pip install 'accelctl[EXTRA]'; scripts/setup.sh installs them):" if extras else
          "extras: unknown (accelctl runs from a checkout, not installed: scripts/setup.sh installs it)")
    for e in extras:
        if not e["missing"]:
            state = color("installed", "32", sys.stdout)
            detail = ", ".join(f"{n} {v}" for n, v in e["installed"])
        else:
            state = color("missing" if not e["installed"] else "partial", "33", sys.stdout)
            detail = "missing " + ", ".join(f"{n}{w}" for n, w in e["missing"])
            if e["elsewhere"]:
                detail += f"; its own environment: {e['elsewhere']}"
        out(f"  {e['extra']:<12} {state:<9} {detail}")
    if targets:
        out("targets of the files named:")
    for t in targets:
        where = f"{t['workload']} / {t['target']}" if t["workload"] else t["file"]
        out(f"  {where}: {t['verdict']} -- {t['detail']}")

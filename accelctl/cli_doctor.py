"""``accelctl doctor``'s text: the host first (at once), the probes as they finish (a counter on
a terminal's stderr: torch's import takes seconds), then the extras installed and what this
machine can do with each target of the files named (issue 27: doctor printed nothing for 13 s,
then did not say which targets could run here or which extras were installed)."""

from __future__ import annotations

import sys


def print_doctor(host: dict, run_probes, extras: list[dict], targets: list[dict], color) -> None:
    print(f"cpu: {host['cpu']} ({host['cores']} cores), native bf16: {'yes' if host['native_bf16'] else 'no'}"
          + (f" ({', '.join(host['bf16_flags'])})" if host["bf16_flags"] else ""))
    print(f"precision: {host['bf16_advice']}")
    print("device adapters present: " + ", ".join(f"{k} ({v})" for k, v in host["adapters_present"].items()))
    print("C++ compiler (optimize { compile = on } on the CPU): "
          + (host["cxx_compiler"] or "none: torch.compile cannot build CPU kernels here (install g++)"), flush=True)
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
        print(f"  {p.name:<20} {state:<6} {detail}")
    print("extras (pip install 'accelctl[EXTRA]'; scripts/setup.sh installs them):" if extras else
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
        print(f"  {e['extra']:<12} {state:<9} {detail}")
    if targets:
        print("targets of the files named:")
    for t in targets:
        where = f"{t['workload']} / {t['target']}" if t["workload"] else t["file"]
        print(f"  {where}: {t['verdict']} -- {t['detail']}")

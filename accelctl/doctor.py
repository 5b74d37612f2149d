"""``accelctl doctor``: what this machine can run, probed without crashing.

Each stack is probed in its own short-lived interpreter, so a stack that aborts on
import (a CUDA build without a GPU, a half-installed vendor plugin) cannot take the
doctor down; a probe reports what it found or the exact error.  Which probes run is the
plug-ins' knowledge: each device family names the probes of its stack
(``accelctl.families``), each backend carries its tool's (``Backend.probes``).

``accelctl doctor --calibrate`` measures the CPU's matmul ceiling once per thread count
(``accelctl.worker.calibrate``, one interpreter per thread count, one after the other so
they do not share the cores) and stores it (``accelctl.contract.calibration``); the
worker's MFU is then measured against it instead of a per-run probe.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from accelctl import entrypoints
from accelctl.families import FAMILIES, PROBES, present_adapters
from accelctl.hostinfo import cpu_count


def all_probes() -> dict[str, str]:
    """Probe name -> code: the probes each device family names, then each backend's own
    (DeepSpeed, Transformer Engine), once each, in family then registry order."""
    from accelctl.plan.registry import BACKENDS

    out: dict[str, str] = {}
    for family in FAMILIES.values():
        for name in family.probes:
            out.setdefault(name, PROBES[name])
    for backend in BACKENDS.values():
        for name, code in backend.probes.items():
            out.setdefault(name, code)
    return out


@dataclass(frozen=True)
class Probe:
    name: str
    ok: bool
    facts: dict
    error: str = ""


def run_probe(name: str, code: str, timeout: float = 60.0) -> Probe:
    try:
        cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Probe(name, False, {}, f"timed out after {timeout:.0f} s")
    if cp.returncode == 0:
        try:
            return Probe(name, True, json.loads(cp.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            return Probe(name, False, {}, "probe printed no result")
    lines = [x for x in cp.stderr.strip().splitlines() if x.strip()]
    last = lines[-1] if lines else f"exit code {cp.returncode}"
    return Probe(name, False, {}, last if len(last) <= 160 else last[:157] + "...")


def host_facts() -> dict:
    from accelctl.contract.calibration import speed_vs_fp32
    from accelctl.hostinfo import cpu_bf16_flags, cpu_has_native_bf16, cpu_model, cpu_precision_advice

    # bf16 advice from detection (the flags) and, where stored, the calibration's bf16/fp32
    # ratio at one thread (the shipped cpu targets' count)
    return {"cpu": cpu_model(), "cores": cpu_count(), "native_bf16": cpu_has_native_bf16(),
            "bf16_flags": cpu_bf16_flags(),
            "bf16_advice": cpu_precision_advice("bf16", measured=speed_vs_fp32("bf16", cpu_model(), 1)),
            "adapters_present": present_adapters(), "cxx_compiler": cxx_compiler()}


def cxx_compiler() -> str:
    """The C++ compiler inductor would call for ``optimize { compile = on }`` on the CPU
    (``$CXX``, else g++, else clang++), as a path; "" when there is none."""
    import os
    import shutil

    for name in (os.environ.get("CXX", ""), "g++", "clang++"):
        found = shutil.which(name) if name else None
        if found:
            return found
    return ""


def run_probes(names: list[str] | None = None, progress=None) -> list[Probe]:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    table = all_probes()
    names = names or list(table)
    found: dict[str, Probe] = {}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = {pool.submit(run_probe, n, table[n]): n for n in names}
        for fut in as_completed(futures):
            found[futures[fut]] = fut.result()
            if progress is not None:
                progress(len(found), len(names), found[futures[fut]])
    return [found[n] for n in names]


def calibrate(threads: list[int], seconds: float = 2.0, n: int = 2048, timeout: float = 300.0):
    """Measure and store the matmul ceiling for each thread count; the stored entries."""
    from accelctl.contract import calibration

    problem = calibration.store_problem()
    if problem:
        raise RuntimeError(f"cannot store a calibration in {calibration.path()}: {problem}")
    stored = []
    for count in threads:
        cmd = [sys.executable, "-m", entrypoints.CALIBRATE, "--threads", str(count), "--n", str(n),
               "--seconds", str(seconds)]
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if cp.returncode != 0:
            lines = [x for x in cp.stderr.strip().splitlines() if x.strip()]
            raise RuntimeError(f"calibration with {count} thread(s) failed: {lines[-1] if lines else cp.returncode}")
        entry = calibration.Calibration(**json.loads(cp.stdout.strip().splitlines()[-1]))
        try:
            calibration.store(entry)
        except OSError as exc:
            raise RuntimeError(exc.strerror or str(exc)) from None
        stored.append(entry)
    return stored


def stored_calibrations() -> list:
    """This CPU's stored ceilings (every thread count), oldest thread count first."""
    from accelctl.contract import calibration
    from accelctl.hostinfo import cpu_model

    model = cpu_model()
    return sorted((c for c in calibration.load_all().values() if c.device == model), key=lambda c: c.threads)


def describe_calibration(c) -> str:
    parts = [f"{name} {flops / 1e9:.1f} GFLOP/s" for name, flops in c.flops.items()]
    fp32, bf16 = c.flops.get("float32"), c.flops.get("bfloat16")
    if fp32 and bf16:
        parts.append(f"bf16/fp32 {bf16 / fp32:.2f}x")
    return f"threads={c.threads}: " + ", ".join(parts) + f"  (measured {c.date}; {c.method})"


# ------------------------------------------------------------------ extras and targets

def extras_installed() -> list[dict]:
    """accelctl's optional extras (its package metadata) and, for each, which of its pinned
    packages this environment has: ``{"extra", "installed": [[name, version]], "missing":
    [[name, wanted]], "elsewhere"}`` -- ``elsewhere`` names the side environment of an extra
    whose pins clash with this one (torch-xla, optimum-habana) and whether it is there.
    [] when accelctl runs from a checkout without being installed (no metadata to read)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    try:
        dist = md.distribution("accelctl")
    except md.PackageNotFoundError:
        return []
    out: dict[str, dict] = {e: {"extra": e, "installed": [], "missing": [], "elsewhere": ""}
                            for e in dist.metadata.get_all("Provides-Extra") or []}
    for line in dist.requires or []:
        req = Requirement(line)
        extra = next((e for e in out if req.marker and req.marker.evaluate({"extra": e})), None)
        if extra is None:
            continue
        try:
            out[extra]["installed"].append([req.name, md.version(req.name)])
        except md.PackageNotFoundError:
            out[extra]["missing"].append([req.name, str(req.specifier)])
    for extra, where in _side_environments().items():
        if extra in out and out[extra]["missing"]:
            out[extra]["elsewhere"] = where
    return list(out.values())


def _side_environments() -> dict[str, str]:
    """extra -> where its packages live instead, and whether that environment is ready."""
    from accelctl.backends.gaudi.check import habana_python
    from accelctl.backends.xla_neuron.cpu_rehearsal import xla_python, xla_venv

    habana = habana_python()
    return {"xla": f"{xla_venv()}: " + ("ready" if xla_python() else "absent (scripts/setup-xla.sh)"),
            "gaudi": f"{habana.parent.parent}: " + ("ready" if habana.exists() else "absent (scripts/setup-habana.sh)")}


def targets_here(paths: list[str]) -> list[dict]:
    """Each workload x target of the files, and what this machine can do with it: ``runs here``,
    ``rehearse here`` (its devices are elsewhere: the command that rehearses it on this CPU),
    ``through ENGINE`` (a scheduler places it), or ``refused`` with plan's code and words."""
    from accelctl.api import load, plan, start_blocker
    from accelctl.errors import AccelctlError
    from accelctl.plan.select import ENGINES_HERE, missing_here

    present = present_adapters()
    out = []
    for path in paths:
        try:
            specs = load(path)
        except AccelctlError as exc:
            d = exc.diagnostics[0] if exc.diagnostics else None
            out.append({"file": path, "workload": None, "target": None, "verdict": "invalid",
                        "detail": f"{d.code}: {d.message}" if d else str(exc)})
            continue
        for spec in specs:
            for t in spec.targets:
                row = {"file": path, "workload": spec.name, "target": t.name}
                try:
                    p = plan(spec, t)
                except AccelctlError as exc:
                    d = exc.diagnostics[0] if exc.diagnostics else None
                    out.append({**row, "verdict": "refused", "detail": f"{d.code}: {d.message}" if d else str(exc)})
                    continue
                if p.engine not in ENGINES_HERE:
                    blocked = start_blocker(p)
                    out.append({**row, "verdict": f"through {p.engine}", "detail": (
                        f"engine {p.engine} cannot start it from here: {blocked}" if blocked else
                        f"engine {p.engine} places it: accelctl run {path} -w {spec.name} -t {t.name} submits it")})
                elif missing_here(spec, t, p.engine, present) is None:
                    out.append({**row, "verdict": "runs here", "detail": f"accelctl run {path} -w {spec.name} "
                                f"-t {t.name}"})
                else:
                    out.append({**row, "verdict": "rehearse here", "detail": f"needs {t.world_size} x {t.device}; "
                                f"accelctl run {path} -w {spec.name} -t {t.name} --rehearse"})
    return out

"""A Neuron plan rehearsed on torch-xla's CPU device (``PJRT_DEVICE=CPU``), in ``.venv-xla``.

Unlike the plain rehearsal (the host's eager CPU adapter) this keeps the plan's device path: the
worker's ``xla`` adapter, ``MpDeviceLoader``, ``xm.optimizer_step``, compile metrics, the launch
environment and a compile cache; only the PJRT device and the model (the stand-in) differ.  One
process: several on PJRT CPU do not communicate (LAB.md), so they would prove nothing.
``--rehearse`` of a Neuron target takes this path when ``.venv-xla`` is complete (its marker
file; nothing imported), else the plain rehearsal with a warning.
"""

from __future__ import annotations

import os
from pathlib import Path

from accelctl import entrypoints
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import RUN_DIR, Launch, Plan
from accelctl.models.catalog import FAMILIES
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[3]
#: Neuron-only variables: read by neuronx-cc / the Neuron runtime, meaningless on PJRT CPU
NEURON_ONLY = ("NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL")
#: the Neuron compile cache's CPU counterpart: torch-xla's persistent cache (read at import)
CACHE_ENV = "XLA_PERSISTENT_CACHE_PATH"


#: ``scripts/setup-xla.sh`` writes this file into the venv once everything is installed
READY_MARKER = "accelctl-xla-ready"


def xla_venv() -> Path:
    """torch-xla's own environment (``$XLA_VENV`` or ``.venv-xla``)."""
    return Path(os.environ.get("XLA_VENV", ROOT / ".venv-xla"))


def xla_python() -> Path | None:
    """The interpreter of that environment, or None until ``scripts/setup-xla.sh`` completed it."""
    venv = xla_venv()
    return venv / "bin" / "python" if (venv / READY_MARKER).exists() else None


def torch_xla_version(venv: Path | None = None) -> str:
    """The torch-xla release installed in the venv, read from its dist-info folder's name
    (no import); "?" when none is found."""
    found = sorted((venv or xla_venv()).glob("lib/python*/site-packages/torch_xla-*.dist-info"))
    return found[-1].name.removeprefix("torch_xla-").removesuffix(".dist-info") if found else "?"


def where(version: str) -> str:
    """The rehearsal's place, as plan text, console and summary say it."""
    return f"the XLA CPU device (torch-xla {version})"


def unavailable(stand_in: Plan, missing: str = "") -> Plan:
    """``stand_in`` (the plain CPU rehearsal), with the warning that the XLA path was not taken:
    no complete venv, or (``missing``) the model's library is not in it."""
    lack = (f"{missing}, which the model's family needs, is not installed in {xla_venv()} (pip install it there)"
            if missing else f"no complete {xla_venv()} (marker {READY_MARKER}); scripts/setup-xla.sh makes it "
            "(about 5 min, 7 GB)")
    why = (f"the XLA CPU rehearsal (torch-xla's own code path: xla device, MpDeviceLoader, xm.optimizer_step, "
           f"compiles counted) is not available: {lack}. This is the plain CPU rehearsal (eager PyTorch)")
    return replace(stand_in, warnings=(*stand_in.warnings, why))


def venv_has(dist: str, venv: Path | None = None) -> bool:
    """Whether the venv holds the distribution ``dist`` (its dist-info folder; nothing imported)."""
    name = dist.replace("-", "_")
    return any((venv or xla_venv()).glob(f"lib/python*/site-packages/{name}-*.dist-info"))


def rehearsal_plan(neuron: Plan, stand_in: Plan) -> Plan:
    """The plan of ``neuron``'s rehearsal on the XLA CPU device: one launch, the venv's
    interpreter running the worker; or ``unavailable(stand_in)`` without a complete venv."""
    python = xla_python()
    if python is None or stand_in.rehearsal is None:
        return unavailable(stand_in)
    library = FAMILIES[neuron.job.model.family].library  # .venv-xla holds timm (the ViT seeds), not all
    if not venv_has(library):
        return unavailable(stand_in, library)
    # the plain rehearsal's threads per process: more OpenMP threads in the parent than one
    # hang the forked loader workers at their first batch (libgomp's pool does not survive fork)
    job, env = rehearsal(neuron, stand_in.job, RUN_DIR)
    job = replace(job, events_dir="")  # the job is data, no placeholder: the runner fills it per run
    version = torch_xla_version()
    launch = Launch("xla-cpu", (str(python), "-m", entrypoints.WORKER, f"{RUN_DIR}/job.json"), env, processes=1)
    r = stand_in.rehearsal
    changes = (
        f"{r.world_size} processes -> 1 (PJRT CPU gives each process a world of its own)",
        "PJRT_DEVICE NEURON -> CPU; " + ", ".join(NEURON_ONLY) + f" dropped; {CACHE_ENV} in the run folder",
        *filter(None, (_kept(c) for c in r.changes if " processes -> " not in c)),
    )
    rehearsal_of = replace(r, changes=changes, on=where(version))
    head = (f"REHEARSAL on {where(version)} of target {r.of} ({r.world_size} x {r.device}) with the stand-in, "
            "random weights: " + "; ".join(changes))
    path = (f"{python} -m accelctl.worker: the worker's xla adapter (torch_xla.device(), MpDeviceLoader with "
            f"{env.get('ACCELCTL_DATALOADER_WORKERS', '?')} loader workers, xm.optimizer_step, torch_xla.sync()); "
            "graph compiles counted and timed apart from step time")
    return replace(stand_in, backend=neuron.backend, launches=(launch,), files=(), job=job,
                   notes=(head, path, stand_in.notes[-1]), rehearsal=rehearsal_of)


#: target options this path keeps (the plan's environment carries them), unlike the plain rehearsal
KEPT_OPTIONS = ("dataloader_workers", "xla_use_bf16")
NOT_REHEARSED = "device options not rehearsed: "


def _kept(change: str) -> str:
    """A change line of the plain rehearsal, less the options this path does rehearse."""
    if not change.startswith(NOT_REHEARSED):
        return change
    left = [o for o in change.removeprefix(NOT_REHEARSED).split(", ") if o not in KEPT_OPTIONS]
    return NOT_REHEARSED + ", ".join(left) if left else ""


def rehearsal(neuron: Plan, stand_in: WorkerJob, run_dir: str | Path) -> tuple[WorkerJob, dict[str, str]]:
    """The job and environment that run ``neuron``'s worker path on the XLA CPU device.

    ``stand_in`` is the job of the same target's ordinary rehearsal (``plan(...,
    rehearse=True)``): stand-in model, a precision this CPU runs, the workload's data and
    measure.  Its device becomes the Neuron plan's (the xla family), one process."""
    run_dir = Path(run_dir)
    device = replace(neuron.job.device, precompile=False)
    job = replace(stand_in, device=device, backend=neuron.backend, events_dir=str(run_dir / "events"),
                  rehearsal_of=neuron.target)
    launch = neuron.launches[-1]  # the measured run (a precompile launch comes first)
    env = {k: v for k, v in launch.env.items() if k not in NEURON_ONLY}
    env["PJRT_DEVICE"] = "CPU"
    env[CACHE_ENV] = str(run_dir / "xla-compile-cache")
    env["PYTHONPATH"] = str(ROOT)
    env["OMP_NUM_THREADS"] = str(max(1, job.threads))
    return job, env

"""A Neuron plan rehearsed on torch-xla's CPU device (``PJRT_DEVICE=CPU``), in ``.venv-xla``.

The ordinary rehearsal (``accelctl run --rehearse``) moves a target onto the host's eager CPU
adapter.  This one keeps the Neuron plan's *device path*: the worker's ``xla`` adapter
(``torch_xla.device()``, ``MpDeviceLoader`` with the plan's loader workers,
``xm.optimizer_step``, ``torch_xla.sync()``, torch-xla's compile metrics), the plan's launch
environment where it means something on a CPU, and a compile cache directory; only the PJRT
device (CPU for NEURON) and the model (the rehearsal's stand-in) differ.  One process: torchrun
plus the ``xla`` process group on PJRT CPU runs but does not communicate (each process is its
own world of one, measured in LAB.md), so several processes would prove nothing.

torch-xla 2.9 needs exactly torch 2.9.0, so it runs from its own venv (``scripts/setup-xla.sh``
-> ``.venv-xla``) as ``.venv-xla/bin/python -m accelctl.worker JOB.json`` with the repository on
``PYTHONPATH`` (the worker imports only contract, errors, hostinfo and spec.types/models).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Plan

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


def rehearsal(neuron: Plan, stand_in: WorkerJob, run_dir: str | Path) -> tuple[WorkerJob, dict[str, str]]:
    """The job and environment that run ``neuron``'s worker path on the XLA CPU device.

    ``stand_in`` is the job of the same target's ordinary rehearsal (``plan(...,
    rehearse=True)``): stand-in model, a precision this CPU runs, the workload's data and
    measure.  Its device becomes the Neuron plan's (the xla family), one process."""
    run_dir = Path(run_dir)
    device = dataclasses.replace(neuron.job.device, precompile=False)
    job = dataclasses.replace(stand_in, device=device, backend=neuron.backend, events_dir=str(run_dir / "events"),
                              rehearsal_of=neuron.target)
    launch = neuron.launches[-1]  # the measured run (a precompile launch comes first)
    env = {k: v for k, v in launch.env.items() if k not in NEURON_ONLY}
    env["PJRT_DEVICE"] = "CPU"
    env[CACHE_ENV] = str(run_dir / "xla-compile-cache")
    env["PYTHONPATH"] = str(ROOT)
    env["OMP_NUM_THREADS"] = str(max(1, job.threads))
    return job, env

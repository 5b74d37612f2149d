"""What accelerators this machine has, found without importing any framework.

Used to pick a default target (``accelctl run`` without ``--target``); ``accelctl
doctor`` goes further and imports the stacks that are installed.
"""

from __future__ import annotations

import glob
import os
import shutil


def present_adapters() -> dict[str, str]:
    """Device adapters present here -> how we know (always includes ``cpu``)."""
    found = {"cpu": "always"}
    if os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi"):
        found["cuda"] = "/dev/nvidia0" if os.path.exists("/dev/nvidia0") else "nvidia-smi on PATH"
    accel = glob.glob("/dev/accel/accel*")
    if accel or shutil.which("hl-smi"):
        found["hpu"] = accel[0] if accel else "hl-smi on PATH"
    neuron = glob.glob("/dev/neuron*")
    if neuron:
        found["xla"] = neuron[0]
    return found


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

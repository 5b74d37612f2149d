"""``accelctl doctor``: what this machine can run, probed without crashing.

Each stack is probed in its own short-lived interpreter, so a stack that aborts on
import (a CUDA build without a GPU, a half-installed vendor plugin) cannot take the
doctor down; a probe reports what it found or the exact error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from accelctl.hostinfo import cpu_count, present_adapters

# Each probe prints one JSON object.  They run in a child interpreter.
PROBES: dict[str, str] = {
    "torch": (
        "import json, torch\n"
        "print(json.dumps({'version': torch.__version__, 'cuda_build': torch.version.cuda,"
        " 'cuda_available': torch.cuda.is_available(), 'devices': torch.cuda.device_count(),"
        " 'threads': torch.get_num_threads()}))"
    ),
    "deepspeed": (
        "import json\nimport deepspeed\nfrom deepspeed.accelerator import get_accelerator as g\na = g()\n"
        "print(json.dumps({'version': deepspeed.__version__, 'accelerator': a.device_name(),"
        " 'comm_backend': a.communication_backend_name()}))"
    ),
    "habana": (
        "import json\nimport habana_frameworks.torch.hpu as hpu\n"
        "print(json.dumps({'available': hpu.is_available(), 'devices': hpu.device_count()}))"
    ),
    "torch_xla": (
        "import json, torch_xla, torch_xla.runtime as xr\n"
        "print(json.dumps({'version': torch_xla.__version__, 'device_type': xr.device_type()}))"
    ),
    "neuron": "import json, torch_neuronx\nprint(json.dumps({'version': torch_neuronx.__version__}))",
    "transformer_engine": (
        "import json, transformer_engine.pytorch as te\nprint(json.dumps({'version': te.__version__}))"
    ),
}


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
    from accelctl.hostinfo import cpu_has_native_bf16, cpu_model

    return {"cpu": cpu_model(), "cores": cpu_count(), "native_bf16": cpu_has_native_bf16(),
            "adapters_present": present_adapters()}


def doctor(names: list[str] | None = None) -> tuple[dict, list[Probe]]:
    from concurrent.futures import ThreadPoolExecutor

    names = names or list(PROBES)
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        probes = list(pool.map(lambda n: run_probe(n, PROBES[n]), names))
    return host_facts(), probes

"""What one training step of a workload's cpu target really holds, beside what the memory model
(``accelctl.plan.memory``) says it holds, term by term.

    .venv/bin/python tests/plan/measured_memory.py FILE TARGET MICRO [MICRO ...]

Each micro-batch runs in a fresh process: the worker's own model (``models.build``), data
(``data.training_batches``), optimizer (the CPU adapter's) and loss (``train_loop.forward_loss``);
two steps (the optimizer's state exists from the first on, as in every measured step), the second
under torch's ``MemTracker``, which follows every tensor's storage and says, at the step's peak,
what it held: parameters, gradients, optimizer state, activations (kept for backward) and
temporaries (backward's gradients of activations, a kernel's scratch).  Beside them the process's
data segment (``VmData``, what ``fit --probe``'s ``RLIMIT_DATA`` caps) before the step and
resident peak (``VmHWM``) after it.  A JSON line per micro-batch; ``slopes`` fits bytes per
sample by least squares.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]


def _vm(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _step_child(path: str, target: str, micro: int) -> dict:

    import torch
    from torch.distributed._tools.mem_tracker import MemTracker

    from accelctl.api import load, plan
    from accelctl.plan import memory
    from accelctl.worker import data, models
    from accelctl.worker.devices import CpuAdapter
    from accelctl.worker.train_loop import forward_loss

    torch.set_num_threads(1)
    (spec,) = load(path)
    t = spec.target(target)
    t = replace(t, batch=replace(t.batch, micro=micro, accumulation=1, global_size=None),
                memory_bytes=0)
    job = plan(spec, t).job
    built = models.build(job, lambda *a: None)
    model = built.model.train()
    if job.gradient_checkpointing:
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:
            model.set_grad_checkpointing(True)
    optimizer = CpuAdapter(0, job.device).make_optimizer(job.optimizer, model.parameters())
    batches = data.training_batches(job, built, 0, 1, lambda *a: None)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        forward_loss(model, built.kind, next(batches)).backward()
        optimizer.step()

    step()  # the optimizer's state is made here, as in every step after the first
    base_data = _vm("VmData")
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    with tracker:
        step()
    peak = {str(k).split(".")[-1].lower(): v for k, v in tracker.get_tracker_snapshot("peak")[torch.device("cpu")].items()}
    fit = memory.estimate(spec, t)
    return {"micro": micro, "tensors_peak": peak, "vm_data_before": base_data, "vm_hwm": _vm("VmHWM"),
            "model": {"weights": fit.weights, "gradients": fit.gradients, "optimizer": fit.optimizer,
                      "activations": fit.activations, "total": fit.total}}


def measure(path: str, target: str, micro: int) -> dict:
    """One micro-batch in a fresh process (nothing of another size left in its heap)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from tests.plan.measured_memory import _step_child; "
            "print(json.dumps(_step_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT), path, target, str(micro)], capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(bytes per sample, intercept): least squares over (micro, bytes)."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return b, my - b * mx


def slopes(rows: list[dict]) -> dict:
    """Bytes per sample of each measured part and of the model's activations."""
    def fit(get) -> float:
        return slope([(r["micro"], get(r)) for r in rows])[0]

    return {"tensors": fit(lambda r: r["tensors_peak"]["total"]),
            "activations_kept": fit(lambda r: r["tensors_peak"]["act"]),
            "temporaries": fit(lambda r: r["tensors_peak"]["temp"]),
            "vm_hwm": fit(lambda r: r["vm_hwm"]),
            "model_activations": fit(lambda r: r["model"]["activations"])}


if __name__ == "__main__":
    file, tgt, *micros = sys.argv[1:]
    results = [measure(file, tgt, int(m)) for m in micros]
    for r in results:
        print(json.dumps(r))
    print(json.dumps({"slopes_bytes_per_sample": slopes(results)}))

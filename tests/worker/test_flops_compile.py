"""A compiled model whose first step is FLOP-counted still compiles (``accelctl.worker.flops``).

torch 2.9-2.11 mark a compiled module's frame "skip" for good when its first call runs under a
dispatch mode such as ``FlopCounterMode``: the H100 device check of 2026-11-26 ran ViT-H/14
with ``optimize { compile = on }`` at the eager step time with 0 graphs compiled.  The
counter runs its step eager, so Dynamo compiles on the next call.  Checked with this
environment's torch and with torch 2.9.0 of ``.venv-xla`` (where the bug shows; NOT RUN without
that environment, which ``scripts/setup.sh --test`` builds).  Dynamo's ``eager`` backend: the
frame skipping is Dynamo's, no inductor build is needed to see it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.backends.xla_neuron.cpu_rehearsal import xla_python

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import torch
from torch._dynamo.utils import counters
from accelctl.worker import flops


class Model(torch.nn.Module):  # a model of its own: torch 2.9's Dynamo compiles no bare nn.Sequential
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x)))


torch.manual_seed(0)
model = Model()
model.compile(backend="eager")
x = torch.randn(8, 16)
with flops.counter() as counter:
    model(x).sum().backward()
counted = counter.get_total_flops()
graphs_counted = int(counters["stats"].get("unique_graphs", 0))
model(x).sum().backward()
model(x).sum().backward()
print(counted, graphs_counted, int(counters["stats"].get("unique_graphs", 0)))
"""

# x 2 FLOP/MAC: the first Linear forward + its weight's gradient (x needs none), 8*16*32 MACs
# each; the second forward + weight and input gradients, 8*32*4 MACs each
EXPECTED_FLOPS = 2 * (2 * 8 * 16 * 32 + 3 * 8 * 32 * 4)


def _run(python: str) -> tuple[int, int, int]:
    done = subprocess.run([python, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    counted, during, after = (int(v) for v in done.stdout.split()[-3:])
    return counted, during, after


@pytest.mark.slow
def test_the_counted_step_is_eager_and_the_next_one_compiles():
    counted, during, after = _run(sys.executable)
    assert counted == EXPECTED_FLOPS
    assert during == 0  # the counted step ran eager
    assert after == 1  # Dynamo compiled the model on the next call


@pytest.mark.slow
def test_with_torch_2_9_where_a_counted_first_call_used_to_stop_compilation():
    python = xla_python()
    if python is None:
        pytest.skip("NOT RUN: no .venv-xla (torch 2.9.0; scripts/setup-xla.sh)")
    counted, during, after = _run(str(python))
    assert counted == EXPECTED_FLOPS
    assert (during, after) == (0, 1)

"""The worker's hpu adapter follows the GaudiConfig the gaudi plan writes.

Habana's PyTorch bridge is not on PyPI, so the fused kernels are stand-ins with the
signatures optimum-habana calls (``FusedAdamW(params, lr=, weight_decay=)``,
``FusedClipNorm(params, max_norm).clip_norm(params)``); what is real is the plan's
``gaudi_config.json``, the environment variable that carries its path, and the adapter.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from accelctl import api
from accelctl.contract import envnames

WORKLOAD = """
workload bert_gaudi {
  task pretrain {}
  model bert(layers = 2, hidden = 64, heads = 4)
  optimizer adamw(lr = 0.001, grad_clip = 1.0)
  target g2 { device = gaudi2  devices = 1 }
}
"""

STAND_INS = {
    "habana_frameworks/__init__.py": "",
    "habana_frameworks/torch/__init__.py": "",
    "habana_frameworks/torch/core.py": "def mark_step():\n    pass\n",
    "habana_frameworks/torch/hpex/__init__.py": "",
    "habana_frameworks/torch/hpex/optimizers.py": """
        import torch
        class FusedAdamW(torch.optim.AdamW):
            made = []
            def __init__(self, params, lr, weight_decay=0.0):
                super().__init__(params, lr=lr, weight_decay=weight_decay)
                FusedAdamW.made.append((lr, weight_decay))
    """,
    "habana_frameworks/torch/hpex/normalization.py": """
        class FusedClipNorm:
            calls = []
            def __init__(self, params, max_norm):
                self.max_norm = max_norm
            def clip_norm(self, params):
                FusedClipNorm.calls.append(self.max_norm)
    """,
}


@pytest.fixture
def habana(tmp_path, monkeypatch):
    for rel, text in STAND_INS.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [m for m in sys.modules if m.startswith("habana_frameworks")]:
        del sys.modules[name]


def test_hpu_adapter_uses_the_fused_kernels_the_plans_gaudi_config_selects(habana, tmp_path, monkeypatch):
    from accelctl.worker.devices import adapter_for

    (spec,) = api.check(api.parse(WORKLOAD, "bert_gaudi.wl"))
    plan = api.plan(spec, "g2")
    (cfg,) = [f for f in plan.files if f.path == "gaudi_config.json"]
    (launch,) = plan.launches
    assert launch.env[envnames.GAUDI_CONFIG] == "{run_dir}/gaudi_config.json"
    (tmp_path / "gaudi_config.json").write_text(cfg.content)
    monkeypatch.setenv(envnames.GAUDI_CONFIG, str(tmp_path / "gaudi_config.json"))

    adapter = adapter_for(plan.job.device, local_rank=0)
    assert adapter.name == "hpu" and adapter.dist_backend == "hccl" and adapter.lazy
    model = torch.nn.Linear(4, 4)
    opt = adapter.make_optimizer(plan.job.optimizer, model.parameters())
    from habana_frameworks.torch.hpex.normalization import FusedClipNorm
    from habana_frameworks.torch.hpex.optimizers import FusedAdamW

    assert isinstance(opt, FusedAdamW) and FusedAdamW.made == [(0.001, 0.0)]
    adapter.clip_grad_norm(model.parameters(), plan.job.optimizer.grad_clip)
    adapter.clip_grad_norm(model.parameters(), plan.job.optimizer.grad_clip)
    assert FusedClipNorm.calls == [1.0, 1.0]


def test_without_a_gaudi_config_the_hpu_adapter_keeps_torchs_optimizer(habana, monkeypatch):
    from accelctl.contract.job import DeviceJob
    from accelctl.workload.types import OptimizerSpec
    from accelctl.worker.devices import adapter_for

    monkeypatch.delenv(envnames.GAUDI_CONFIG, raising=False)
    adapter = adapter_for(DeviceJob(kind="gaudi2", adapter="hpu", comm="hccl"), local_rank=0)
    opt = adapter.make_optimizer(OptimizerSpec(name="adamw"), torch.nn.Linear(2, 2).parameters())
    assert type(opt) is torch.optim.AdamW

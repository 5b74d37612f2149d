"""The engines take what they ask for a family's devices from its row (``accelctl.families``):
a toy family registered in the families' table and the catalog alone changes what Kubernetes,
AWS Batch and Slurm ask for, and a family with nothing to ask by is refused, not given a pod or
a container without its devices."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accelctl.api import load
from accelctl.contract.plan import Launch
from accelctl.engines import aws_batch, kubernetes, slurm
from accelctl.errors import PlanError
from accelctl.families import FAMILIES
from accelctl.catalog import DEVICES
from accelctl.frozen import replace

WORKLOAD = """
workload w {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 2)
  target t { device = gaudi2  devices = 8 }
}
"""


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """Device kind ``toy1`` of family ``toy``: (spec, its target on toy1, register(**row fields)))."""
    path = tmp_path / "w.wl"
    path.write_text(WORKLOAD)
    (spec,) = load(path)
    target = replace(spec.targets[0], device="toy1")
    monkeypatch.setitem(DEVICES, "toy1", replace(DEVICES["gaudi2"], name="toy1", adapter="toy"))

    def register(**row):
        bare = {"k8s_resource": "", "slurm_gres": "", "batch_gpu": False, "batch_device_files": ()}
        monkeypatch.setitem(FAMILIES, "toy", replace(FAMILIES["hpu"], name="toy", **{**bare, **row}))
    return spec, target, register


def test_kubernetes_asks_for_the_rows_resource_and_refuses_a_family_without_one(toy):
    spec, target, register = toy
    register(k8s_resource="example.com/toy")
    limits, _ = kubernetes._resources(spec, target, {})
    assert limits["example.com/toy"] == "8"
    register()
    with pytest.raises(PlanError, match="Kubernetes has no resource accelctl knows for toy devices"):
        kubernetes._resources(spec, target, {})


def test_aws_batch_maps_the_rows_device_files_and_refuses_a_family_it_cannot_give(toy):
    spec, target, register = toy
    register(batch_device_files=("/dev/toy{i}",), batch_units_per_file=4)
    resources, devices = aws_batch.accelerator(target)
    assert resources == [] and [d["hostPath"] for d in devices] == ["/dev/toy0", "/dev/toy1"]
    register()
    with pytest.raises(PlanError, match="AWS Batch cannot give a container toy devices"):
        aws_batch.AwsBatchEngine().wrap(spec, target, None, None, SimpleNamespace(settings={}))


def test_slurm_counts_the_devices_in_the_rows_gres(toy):
    spec, target, register = toy
    launch = Launch("node", ["torchrun", "--nproc_per_node=8", "-m", "accelctl.worker", "job.json"], {})
    register(slurm_gres="toy")
    assert "#SBATCH --gres=toy:8" in slurm.render_script(spec, target, launch, {}).splitlines()
    register()
    assert "--gres" not in slurm.render_script(spec, target, launch, {})

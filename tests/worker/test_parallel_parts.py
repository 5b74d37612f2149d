"""The parts of FSDP / tensor / pipeline parallel that need no process group, checked in one
process against the unsplit model: the mesh arithmetic, pipeline stages chained in order,
GPT-2's Conv1D as a Linear with its fused QKV regrouped per rank."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from accelctl.contract.mesh import Mesh, stage_layers
from accelctl.models.parallel_plans import PIPELINE_FAMILIES, PLANS
from accelctl.workload.types import ParallelSpec
from parallel_jobs import SHAPES, job


def test_mesh_puts_tp_innermost_and_every_rank_once():
    mesh = Mesh.of(8, tp=2, pp=2)
    assert mesh.shape == (2, 2, 2)
    coords = [mesh.coords(r) for r in range(8)]
    assert coords[1] == {"pp": 0, "dp": 0, "tp": 1} and coords[2] == {"pp": 0, "dp": 1, "tp": 0}
    assert coords[4] == {"pp": 1, "dp": 0, "tp": 0}
    assert [mesh.rank(**c) for c in coords] == list(range(8))
    with pytest.raises(ValueError):
        Mesh.of(6, tp=4)


def test_stage_layers_cover_every_layer_once_in_order():
    for layers, pp in ((4, 2), (5, 2), (7, 3), (80, 8)):
        got = [i for s in range(pp) for i in stage_layers(layers, pp, s)]
        assert got == list(range(layers))


@pytest.mark.parametrize("family", PIPELINE_FAMILIES)
def test_stages_chained_compute_the_models_own_loss(family, tmp_path):
    from accelctl.worker import data, models, pipeline

    j = job(family, ParallelSpec(strategy="pipeline", pp=2), tmp_path / family)
    built = models.build(j, lambda level, msg: None)
    model = built.model.eval()
    batch = next(data.training_batches(j, built, 0, 1, lambda level, msg: None))
    want = model(**batch).loss
    mesh = Mesh.of(2, pp=2)
    first, last = (pipeline.build_stage(model, family, mesh, s) for s in range(2))
    logits = last(first(batch["input_ids"]))
    got = pipeline.loss_fn(built.kind)(logits, batch["labels"])
    assert float(got.detach()) == pytest.approx(float(want.detach()), abs=1e-6)
    # the stages hold disjoint blocks, all of them; the tied embedding sits on both ends
    assert len(first.blocks) + len(last.blocks) == SHAPES[family]["layers"]
    # and name them by their index in the whole model: the stages' parameter names are the keys
    # both save under into one torch.distributed.checkpoint folder (a shared name would be
    # written once, by one stage, and loaded into both)
    assert not {n for n, _ in first.named_parameters()} & {n for n, _ in last.named_parameters()}
    tied = pipeline.tied_weight(model)
    assert (tied is not None) == (family in ("gpt2", "bert"))


def test_gpt2_fused_qkv_regrouped_gives_each_rank_its_own_heads():
    from transformers import GPT2Config, GPT2LMHeadModel

    from accelctl.worker.tensor_parallel import as_linear, regroup_qkv

    torch.manual_seed(0)
    attn = GPT2LMHeadModel(GPT2Config(n_embd=64, n_head=4, n_layer=1, vocab_size=50)).transformer.h[0].attn
    x = torch.randn(2, 5, 64)
    q, k, v = attn.c_attn(x).split(64, dim=-1)
    linear = as_linear(attn.c_attn)
    assert torch.allclose(linear(x), attn.c_attn(x), atol=1e-6)
    regroup_qkv(linear, tp=2)
    for rank, part in enumerate(linear(x).split(96, dim=-1)):  # rank r's column slice
        rq, rk, rv = part.split(32, dim=-1)
        heads = slice(32 * rank, 32 * (rank + 1))
        assert torch.allclose(rq, q[..., heads], atol=1e-6) and torch.allclose(rk, k[..., heads], atol=1e-6)
        assert torch.allclose(rv, v[..., heads], atol=1e-6)


def test_every_plan_names_modules_the_library_builds():
    """Each module path of the plan table exists in the family's stand-in (a renamed module in a
    new transformers/timm would otherwise be silently left whole)."""
    from accelctl.worker import models

    for family in PLANS:
        model = models.build(job(family, ParallelSpec(), Path("unused")), lambda level, msg: None).model
        for block in model.get_submodule(PLANS[family].blocks):
            for path, _ in PLANS[family].split:
                block.get_submodule(path)
            for path, attr in PLANS[family].heads:
                assert hasattr(block.get_submodule(path), attr), (family, path, attr)

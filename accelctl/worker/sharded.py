"""The ``sharded`` execution strategy: FSDP2, tensor and pipeline parallel on one DeviceMesh.

The mesh is ``accelctl.contract.mesh.Mesh`` (pp × dp × tp, tp innermost), the same the plan
printed.  In order: pipeline parallel keeps this rank's stage only; tensor parallel splits
each block over the tp dimension (``tensor_parallel``); FSDP shards what is left over dp
(``fsdp``); without FSDP, replicas on dp average their gradients after backward.  Data: the
ranks of one tp group (and one pipeline) read the same batches -- their dp index is the
data rank (``RunContext.data_rank``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from accelctl.contract.mesh import Mesh
from accelctl.models.parallel_plans import PLANS
from accelctl.worker import mesh_grads
from accelctl.worker.plain_strategy import Plain


@dataclass
class Groups:
    mesh: Mesh
    coords: dict
    device_mesh: object
    dp: object = None
    pp: object = None
    #: the group of the first and last stage of this rank's pipeline (a tied weight's copies)
    tied: object = None


def make_groups(ctx) -> Groups:
    from torch.distributed.device_mesh import init_device_mesh

    p = ctx.job.parallel
    mesh = Mesh.of(ctx.world, p.tp, p.pp)
    dm = init_device_mesh(ctx.adapter.device.type, mesh.shape, mesh_dim_names=("pp", "dp", "tp"))
    g = Groups(mesh, mesh.coords(ctx.rank), dm, dp=dm["dp"].get_group(), pp=dm["pp"].get_group())
    if mesh.pp > 1:
        for d in range(mesh.dp):  # every rank creates every group, in the same order
            for t in range(mesh.tp):
                ranks = [mesh.rank(0, d, t), mesh.rank(mesh.pp - 1, d, t)]
                group = dist.new_group(ranks)
                if ctx.rank in ranks:
                    g.tied = group
    return g


class Sharded(Plain):
    name = "sharded"
    sharded_state = True

    def prepare_training(self, model, ctx):
        from accelctl.worker import fsdp, pipeline, tensor_parallel

        job, family = ctx.job, ctx.job.model.family
        self.groups = g = make_groups(ctx)
        self.tied = None
        if g.mesh.pp > 1:
            tied = pipeline.tied_weight(model)
            model = pipeline.build_stage(model, family, g.mesh, g.coords["pp"])
            self.tied = tied if tied is not None and any(p is tied for p in model.parameters()) else None
            ends = ["embeddings"] * model.first + ["head"] * model.last
            ctx.log("info", f"pipeline: stage {g.coords['pp']} of {g.mesh.pp} ({job.parallel.schedule}) holds blocks "
                            f"{', '.join(model.blocks)}" + "".join(f" + {e}" for e in ends))
        if g.mesh.tp > 1:
            model = tensor_parallel.apply(model, family, g.device_mesh["tp"], job.parallel.sequence_parallel,
                                           ctx.log)
        if job.optimize.compile and job.task.kind != "generate":  # before fully_shard (the plan: fsdp, no tp/pp)
            from accelctl.worker import optimize

            if family in PLANS:
                optimize.compile_blocks(model.get_submodule(PLANS[family].blocks), job, ctx.log)
            else:  # FSDP shards the root only: the model compiled whole
                optimize.compile_module(model, job)
                ctx.log("info", f"torch.compile(mode={job.optimize.compile_mode}) of {type(model).__name__} "
                                "before fully_shard: compiled in warm-up")
        if job.parallel.strategy == "fsdp":
            model = fsdp.apply(model, family, g.device_mesh["dp"], job.parallel, job.precision.dtype)
        return model

    def training_engine(self, model, optimizer, ctx, batches, kind):
        if self.groups.mesh.pp == 1:
            return None
        from accelctl.worker.pipeline import PipelineEngine

        return PipelineEngine(model, optimizer, ctx, batches, kind, self.groups, self.tied)

    def reduce_gradients(self, model, ctx) -> None:
        if ctx.job.parallel.strategy != "fsdp":  # FSDP reduce-scatters in backward
            mesh_grads.average_over(model.parameters(), self.groups.dp, self.groups.mesh.dp)

    def clip_grad_norm(self, model, max_norm: float, adapter) -> None:
        mesh_grads.clip(model.parameters(), max_norm)

"""Pipeline parallel through ``torch.distributed.pipelining``: this rank's stage of the model
(``mesh.stage_layers``: contiguous blocks; embeddings first, norm and head last) and a schedule
(GPipe or 1F1B) over the step's ``accumulation`` micro-batches, so a step's arithmetic is the
plain loop's.  Each stage calls the model's own modules as its forward does (masks from the
model's own builders, rotary embeddings recomputed per stage); the packed LM batches have no
padding, so a stage needs only the hidden states.  A weight tied across stages lives on the first
and last stage, its gradients summed before the step (Megatron-LM's rule).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from accelctl.contract.mesh import stage_layers
from accelctl.models.parallel_plans import PLANS
from accelctl.worker import mesh_grads
from accelctl.worker.context import NonFiniteLoss
from accelctl.worker.models import CAUSAL_LM


class Stage(nn.Module):
    """Blocks ``layers`` of ``model`` with the embeddings (first) and the head (last)."""

    def __init__(self, model: nn.Module, family: str, layers: range, first: bool, last: bool) -> None:
        super().__init__()
        self.family, self.first, self.last = family, first, last
        self.config = model.config
        # named by their index in the whole model: each stage's parameter names are its own
        # (the checkpoint's keys: stages save into one torch.distributed.checkpoint folder)
        every = model.get_submodule(PLANS[family].blocks)
        self.blocks = nn.ModuleDict({str(i): every[i] for i in layers})
        if family == "llama":
            self.embed = model.model.embed_tokens if first else None
            self.rotary = model.model.rotary_emb
            self.head = nn.Sequential(model.model.norm, model.lm_head) if last else None
        elif family == "gpt2":
            t = model.transformer
            self.embed = nn.ModuleDict({"wte": t.wte, "wpe": t.wpe, "drop": t.drop}) if first else None
            self.head = nn.Sequential(t.ln_f, model.lm_head) if last else None
        elif family == "bert":
            self.embed = model.bert.embeddings if first else None
            self.masks = model.bert._create_attention_masks  # a bound method: reads the config only
            self.head = model.cls if last else None
        else:
            raise ValueError(f"no pipeline stages for family {family!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.family
        if self.first:
            x = self._embed(x)
        b, s = x.shape[:2]
        pos = torch.arange(s, device=x.device).unsqueeze(0)
        ones = torch.ones(b, s, dtype=torch.long, device=x.device)
        if f == "bert":
            mask, _ = self.masks(attention_mask=ones, encoder_attention_mask=None, embedding_output=x,
                                 encoder_hidden_states=None, past_key_values=None)
        else:
            from transformers.masking_utils import create_causal_mask

            mask = create_causal_mask(config=self.config, inputs_embeds=x, attention_mask=ones,
                                      past_key_values=None, position_ids=pos)
        for block in self.blocks.values():
            if f == "llama":
                x = block(x, attention_mask=mask, position_embeddings=self.rotary(x, position_ids=pos),
                          position_ids=pos)
            elif f == "gpt2":
                x = block(x, None, mask, None, use_cache=False, position_ids=pos)
            else:
                x = block(x, mask)
            x = x[0] if isinstance(x, tuple) else x
        return self.head(x) if self.last else x

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        if self.family == "gpt2":
            pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            return self.embed["drop"](self.embed["wte"](ids) + self.embed["wpe"](pos))
        return self.embed(ids) if self.family == "llama" else self.embed(input_ids=ids)


def loss_fn(kind: str):
    """The loss the model's own forward computes from ``labels``: next-token cross-entropy
    (logits in fp32, the last position predicts nothing) or masked-LM cross-entropy."""
    def causal(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        shifted = F.pad(labels, (0, 1), value=-100)[..., 1:]
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), shifted.reshape(-1), ignore_index=-100)

    def masked(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)

    return causal if kind == CAUSAL_LM else masked


def tied_weight(model: nn.Module):
    """The input embedding's weight when the output projection shares it, else None."""
    inp, out = model.get_input_embeddings(), model.get_output_embeddings()
    return inp.weight if out is not None and out.weight is inp.weight else None


def build_stage(model: nn.Module, family: str, mesh, pp_rank: int) -> Stage:
    layers = len(model.get_submodule(PLANS[family].blocks))
    return Stage(model, family, stage_layers(layers, mesh.pp, pp_rank), pp_rank == 0, pp_rank == mesh.pp - 1)


class PipelineEngine:
    """``train_step(step)`` of one pipeline stage (replaces the loop's own)."""

    SCHEDULES = {"gpipe": "ScheduleGPipe", "one_f_one_b": "Schedule1F1B"}
    #: no DeepSpeed engine behind it (the checkpointer saves the stage's model and optimizer
    #: through torch.distributed.checkpoint, ``sharded_checkpoint``)
    engine = None
    #: torch's FlopCounterMode cannot watch a stage's first step (its module hooks break the
    #: stage's backward shape inference through autograd.grad): no FLOPs, no MFU
    counts_flops = False

    def __init__(self, stage: Stage, optimizer, ctx, batches, kind: str, groups, tied) -> None:
        from torch.distributed import pipelining

        self.module, self.optimizer, self.ctx, self.batches, self.groups = stage, optimizer, ctx, batches, groups
        job = ctx.job
        self.tied = tied  # the tied weight on this stage (first/last) or None
        pipe = pipelining.PipelineStage(stage, groups.coords["pp"], groups.mesh.pp, ctx.adapter.device,
                                        group=groups.pp)
        cls = getattr(pipelining, self.SCHEDULES[job.parallel.schedule])
        self.schedule = cls(pipe, n_microbatches=job.batch.accumulation, loss_fn=loss_fn(kind), scale_grads=True)

    def train_step(self, step: int) -> float:
        ctx, job, adapter = self.ctx, self.ctx.job, self.ctx.adapter
        self.optimizer.zero_grad(set_to_none=True)
        micro = [next(self.batches) for _ in range(job.batch.accumulation)]
        if any(not bool(b["attention_mask"].all()) for b in micro if "attention_mask" in b):
            raise ValueError("pipeline stages take packed blocks without padding; this batch has padding")
        ids = torch.cat([b["input_ids"] for b in micro]).to(adapter.device)
        labels = torch.cat([b["labels"] for b in micro]).to(adapter.device)
        stage, losses = self.module, []
        with ctx.precision.autocast(adapter):
            if stage.first:
                self.schedule.step(ids, target=labels if stage.last else None, losses=losses)
            elif stage.last:
                self.schedule.step(target=labels, losses=losses)
            else:
                self.schedule.step()
        params = list(self.module.parameters())
        if self.tied is not None and self.tied.grad is not None:
            torch.distributed.all_reduce(self.tied.grad, group=self.groups.tied)
        mesh_grads.average_over(params, self.groups.dp, self.groups.mesh.dp)
        # the global loss: the last stage's micro-batch mean, averaged over the dp replicas
        held = torch.stack([loss.detach().float() for loss in losses]).mean() if losses else torch.zeros(())
        if step == job.debug.inject_nan_at_step:
            held = held * float("nan")
        torch.distributed.all_reduce(held)
        value = float(held) / self.groups.mesh.dp
        if not math.isfinite(value):
            raise NonFiniteLoss(step, value)
        if job.optimizer.grad_clip > 0:
            skip = (self.tied,) if self.tied is not None and stage.last and not stage.first else ()
            mesh_grads.clip(params, job.optimizer.grad_clip, plain_group=self.groups.pp, skip=skip)
        adapter.optimizer_step(self.optimizer)
        return value

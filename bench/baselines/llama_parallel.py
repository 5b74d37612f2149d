"""Bare FSDP2 or tensor-parallel training of a Llama causal LM on CPU ranks (gloo), written
with torch's own API only: ``fully_shard`` on each decoder layer and then the root
(``--parallel fsdp``), or ``parallelize_module`` of each layer on a 1-D ``DeviceMesh`` with
the Megatron split -- q/k/v and gate/up column-wise, o and down row-wise (``--parallel tp``).
Started by torchrun:

    python -m torch.distributed.run --nproc-per-node 2 bench/baselines/llama_parallel.py --parallel fsdp

Same model, data, batch, seed and steps as bench/workloads/llama_2ranks.wl:

* the model: ``LlamaForCausalLM`` of the given shape, built after ``torch.manual_seed(seed)``
  on every rank (the same weights everywhere), untied head;
* the data: the token blocks accelctl's synthetic data makes for a causal LM (8 blocks of
  counting sequences ``x[t+1] = x[t] + stride`` in a window of 128 ids above 4 reserved ones,
  from a generator seeded ``seed * 1000 + data rank``), written out here so the two arms'
  first losses can be compared; FSDP ranks each read their own shard, tensor-parallel ranks
  the same one (they split the model, not the batch);
* the optimizer: AdamW with the workload's lr and weight decay 0; torch's fused CPU kernel
  with ``--fused-adamw`` (FSDP: every parameter a DTensor), the plain one under tensor
  parallel (the fused kernel takes one tensor kind per call: split DTensors and plain norms
  mix there).

Rank 0 prints one JSON line: the measured step times (warm-up excluded), the parameter count,
and the loss curve averaged over the ranks (one all-reduce after the loop, not in the steps).
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from _common import adamw, leave, loop_args, report, timed_steps

#: ids below this are the stand-in tokenizer's specials (pad, bos, eos, mask); the counting window
RESERVED, WINDOW, POOL = 4, 128, 8


def more_args(ap) -> None:
    ap.add_argument("--parallel", choices=("fsdp", "tp"), required=True)
    ap.add_argument("--ffn", type=int, default=688)
    ap.add_argument("--max-positions", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)


def llama(args):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.ffn,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.heads, head_dim=args.hidden // args.heads,
                         max_position_embeddings=args.max_positions, tie_word_embeddings=False,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(args.seed)
    return LlamaForCausalLM(config).train()


def counting_blocks(args, data_rank: int) -> list[torch.Tensor]:
    span = min(args.vocab - RESERVED, WINDOW)
    g = torch.Generator().manual_seed(args.seed * 1000 + data_rank)
    pool = []
    for _ in range(POOL):
        start = torch.randint(0, span, (args.batch, 1), generator=g)
        stride = torch.randint(1, 4, (args.batch, 1), generator=g)
        pool.append(RESERVED + (start + stride * torch.arange(args.seq).unsqueeze(0)) % span)
    return pool


def shard(model, args, mesh) -> None:
    if args.parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    col, row = ColwiseParallel(), RowwiseParallel()
    plan = {"self_attn.q_proj": col, "self_attn.k_proj": col, "self_attn.v_proj": col, "self_attn.o_proj": row,
            "mlp.gate_proj": col, "mlp.up_proj": col, "mlp.down_proj": row}
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)


args = loop_args(more_args)
torch.set_num_threads(args.threads)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (world,))
model = llama(args)
params = sum(p.numel() for p in model.parameters())
shard(model, args, mesh)
opt = adamw(model.parameters(), args)
blocks = itertools.cycle(counting_blocks(args, rank if args.parallel == "fsdp" else 0))
losses = []


def step():
    ids = next(blocks)
    opt.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
    loss.backward()
    opt.step()
    losses.append(loss.detach())


times = timed_steps(step, args.warmup, args.steps)
curve = torch.stack(losses)
dist.all_reduce(curve)
if rank == 0:
    report(times, params=params, losses=(curve / world).tolist(), ranks=world)
dist.barrier()
leave()

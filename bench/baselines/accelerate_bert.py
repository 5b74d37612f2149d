"""The BERT masked-LM loop written the Accelerate way: one process, or data parallel on CPU.

    accelerate launch --cpu --num_processes 1 bench/baselines/accelerate_bert.py --steps 20
    accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 bench/baselines/accelerate_bert.py

Two ranks on one machine's CPU: ``--cpu --num_processes 2`` starts ONE process (accelerate
1.15's simple launcher spreads CPU ranks only through ``mpirun``, ``--mpirun_hostfile``), so
the ranks come from ``--multi_gpu``'s launcher (torchrun), and ``Accelerator(cpu=True)`` in
each sees ``LOCAL_RANK`` and makes it ``DistributedType.MULTI_CPU``: gloo, the model wrapped in
DDP.  Each rank draws its own token blocks (seeded by its index), ``--batch`` per rank.  The
main process prints its measured steps (warm-up excluded), as accelctl's arm reads rank 0's
events; the ranks meet in every step's gradient all-reduce, so their step times agree.

Needs the ``bench`` extra (accelerate); ``python -m bench`` reports its comparisons as not
run when accelerate is not installed.
"""

from __future__ import annotations

import itertools

import torch
from accelerate import Accelerator

from _bert import bert_args, bert_mlm
from _common import adamw, report, timed_steps

args = bert_args(lambda ap: ap.add_argument(
    "--expect-processes", type=int, default=None,
    help="fail unless the launcher started this many ranks (a launch that silently ran one is no DDP run)"))

torch.set_num_threads(args.threads)
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = bert_mlm(args)
opt = adamw(model.parameters(), args)
if args.expect_processes is not None and accelerator.num_processes != args.expect_processes:
    raise SystemExit(f"accelerate_bert.py: {accelerator.num_processes} process(es) "
                     f"({accelerator.distributed_type}), expected {args.expect_processes}")
model, opt = accelerator.prepare(model, opt)
g = torch.Generator().manual_seed(accelerator.process_index)
pool = [torch.randint(5, min(args.vocab, 133), (args.batch, args.seq), generator=g) for _ in range(8)]
blocks = itertools.cycle(pool)
MASK = 3


def step():
    ids = next(blocks)
    chosen = torch.rand(ids.shape) < 0.15
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = torch.where(chosen, torch.full_like(ids, MASK), ids)
    opt.zero_grad(set_to_none=True)
    loss = model(input_ids=inputs, attention_mask=torch.ones_like(ids), labels=labels).loss
    accelerator.backward(loss)
    opt.step()


times = timed_steps(step, args.warmup, args.steps)
if accelerator.is_main_process:
    report(times, processes=accelerator.num_processes, distributed_type=str(accelerator.distributed_type))
accelerator.end_training()  # the process group, destroyed as Accelerate's docs end a script

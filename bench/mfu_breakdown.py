"""Where a CPU training step's time goes, by op class, and its MFU against the calibrated ceiling.

    .venv/bin/python bench/mfu_breakdown.py                       # BERT and GPT-2 bench workloads
    .venv/bin/python bench/mfu_breakdown.py bench/workloads/bert_mlm.wl --steps 20
    .venv/bin/python bench/mfu_breakdown.py --optimizer for-loop  # AdamW as torch's CPU default, not fused
    .venv/bin/python bench/mfu_breakdown.py --json out.json
    .venv/bin/python bench/mfu_breakdown.py --compile --what-if-no-attention-dropout  # 4 arms each
    .venv/bin/python bench/mfu_breakdown.py --compile --inductor-own-random            # an experiment

For each workload file it builds what the worker builds -- the plan's ``WorkerJob``, the model
(``accelctl.worker.models``), the optimizer (the CPU adapter's), the batches
(``accelctl.worker.data``) -- and runs the worker's fp32 step (zero_grad, forward + loss,
backward, the loss read on the host, optimizer step) on ``job.threads`` threads:

1. ``--warmup`` steps, then ``--steps`` timed steps (no profiler): the **step time** (median)
   and the **MFU** = FLOPs per step / step time / ceiling;
2. one step under ``FlopCounterMode``: the FLOPs of each op class;
3. ``--steps`` steps under ``torch.profiler``: each op's self CPU time, classified (below), as
   a fraction of the profiled step; the profiler's own cost inflates the profiled step a few
   percent, so the class *times* are those fractions of the unprofiled step.

Op classes (by the aten op, else by the op or autograd node that called it):

* ``matmul``: the linear layers' GEMMs, forward and backward (``mm``, ``addmm``, bias
  gradient sums under ``AddmmBackward0``);
* ``attention``: the attention core, forward and backward: every op on a 4-D
  ``[batch, heads, seq, seq|head_dim]`` tensor (in training ``scaled_dot_product_attention``
  takes its math path on CPU -- attention dropout > 0 -- so that is its ``bmm``, softmax,
  dropout, scaling and the head split/merge copies);
* ``norm/act/dropout``: layer norm, GELU, hidden dropout, residual adds -- elementwise work;
* ``embedding+loss``: embedding lookups and their scatter backward, log-softmax + NLL;
* ``optimizer``: everything inside ``optimizer.step()`` and ``zero_grad()``;
* ``data``: drawing the next batch (synthetic tokens, MLM masking);
* ``copies/views/other ops``: the remaining ops (copies, views, transposes, fills);
* ``python/framework``: the step's time in no op at all (Python, the autograd engine between
  nodes, module calls) -- the profiled step minus every op's self time.

* ``compiled graph`` (``--compile`` arms): the self time of inductor's graphs -- its fused C++
  kernels (layer norm, GELU, dropout, softmax, residual adds, loss) and their wrapper; the
  GEMMs it calls out to still show as ``aten::mm``/``addmm``/``bmm`` (the attention ``bmm`` as
  3-D, so in ``matmul``).  Not comparable op class by op class with the eager arm: compare
  the step, the MFU, and GEMMs vs the rest.

Arms (one line each at the end, beside the eager one):

* ``--compile``: the target's ``optimize { compile = on }`` set, so the plan and the worker's
  own ``optimize.apply`` compile the model as a run does; the ``--warmup`` steps compile
  (reported, never in the step) and a recompile in the timed steps is counted.  FLOPs are
  counted on the eager path (Dynamo leaves a frame alone under ``FlopCounterMode``).
* ``--what-if-no-attention-dropout``: a WHAT-IF -- the same model rebuilt (same class and
  seed-drawn weights) with attention dropout 0 in its config, so that sdpa can take its
  fused CPU kernel (``_scaled_dot_product_flash_attention_for_cpu``; with dropout > 0 torch
  2.14.1 takes ``_scaled_dot_product_attention_math``: the profile names the kernel each
  arm ran).  It explains the gap; it is not the model the workload trains.
* ``--inductor-own-random``: an EXPERIMENT on the compiled arms: dropout masks from inductor's
  generated random-number code, as ``optimize { compile = on }`` ran before the worker set
  inductor's ``fallback_random`` (aten's RNG kernel) on the host CPU.

Per class: its share of the step, its time, its FLOPs and achieved FLOP/s against the ceiling,
and the MFU the step would reach if that class took no time ("MFU without it"): what stops
the step's MFU short of the ceiling.

The ceiling is ``accelctl doctor --calibrate``'s stored one for this CPU and thread count
(``accelctl.contract.calibration``); without one the script measures it now the same way
(median of 2048² fp32 matmuls over 2 s, ``accelctl.worker.calibrate``) and says so.

Measured here, 2026-11-23: Intel Xeon (KVM guest: family 6 model 167 as reported, AVX-512, AVX512-BF16, AMX; not
the AVX2 AMD EPYC of earlier sessions), 2 vCPUs shared with other sessions (load average
8-15, hence CPU-time clocks), torch 2.14.1, transformers 5.23.0, one thread, fp32, 10 steps.
Ceiling: median 2048² fp32 matmul 149-154 GFLOP/s (CPU time; bf16 on AMX: 768 GFLOP/s, 5.3x).

  class (share of step / achieved of ceiling)   BERT 4x256 MLM      GPT-2 4x256 CLM
  matmul (linear layers)                        60 % / 0.71         44 % / 0.92
  attention core (math path: bmm, softmax, ...)  13 % / 0.25         10 % / 0.32
  norm/act/dropout                              15 %                37 % (gelu_new: ~8 ops)
  embedding+loss                                 2 %                 1 %
  optimizer (fused AdamW; for-loop: 10 %, 7 %)   3 %                 3 %
  copies/views/other + python/framework          7 %                 6 %
  step (CPU time), MFU                          167 ms, 0.459       174 ms, 0.433
  the same with torch's for-loop AdamW          168 ms, 0.441       190 ms, 0.383

Arms, 2026-11-23 (``--steps 10 --compile --what-if-no-attention-dropout``, 3 runs, medians,
load average 2.5-3.4; ceiling measured each run 160-163 GFLOP/s; ``x``: eager step / arm's):

  arm                                  BERT step, MFU, x          GPT-2 step, MFU, x
  eager (sdpa math path)               140.5 ms, 0.501            159.0 ms, 0.434
  WHAT-IF attention dropout 0 (fused)  133.6 ms, 0.526, 1.05      149.7 ms, 0.470, 1.06
  compiled, inductor's own RNG         166.8 ms, 0.423, 0.84      180.0 ms, 0.387, 0.88
  compiled + WHAT-IF, inductor's RNG   144.6 ms, 0.486, 0.97      150.2 ms, 0.460, 1.06
  compiled, fallback_random (2 runs)   143.5 ms, 0.501, 1.04      151.4 ms, 0.467, 1.06
  (compile = on now runs with fallback_random on the host CPU: the last line)

Compiled, inductor's own dropout RNG is what costs: its fused softmax + attention-dropout
kernel took 9-14 ms per layer (BERT, ``torch._inductor.config.cpp.enable_kernel_profile``);
with aten's RNG (fallback_random) the compiled step is 1.04-1.06x eager, no more.

So the step's MFU is ~0.45 of the ceiling, short of 0.70: even the linear layers' GEMMs
(512x256 by 256x256/1024: small for one AVX-512 core) reach 0.71-0.92 of the 2048² rate; the
attention core runs at a quarter of it (training on CPU takes sdpa's math path, since the
fused CPU kernel has no dropout); and a quarter to a third of the step is elementwise work
with no FLOPs counted (layer norm, GELU -- GPT-2's tanh approximation as separate ops --,
dropout's random masks, residual adds).  What moved it: fused AdamW (now the worker's
default on CPU: optimizer 16.4 -> 5.8 ms, BERT; 13.5 -> 4.3 ms, GPT-2).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: this checkout's accelctl
    sys.path.insert(0, str(ROOT))

from accelctl.frozen import replace  # noqa: E402  (after the path: this checkout's)

WORKLOADS = [ROOT / "bench" / "workloads" / "bert_mlm.wl", ROOT / "bench" / "workloads" / "gpt2_clm.wl"]

CLASSES = ("matmul", "attention", "norm/act/dropout", "compiled graph", "embedding+loss", "optimizer", "data",
           "copies/views/other ops", "python/framework")
#: the profiler's event around one inductor graph (forward or backward) of a compiled model:
#: its self time is inductor's fused C++ kernels and their wrapper (the GEMMs it calls out to
#: -- ``aten::mm``/``addmm``/``bmm`` -- are their own events under it)
COMPILED_GRAPH = "## Call CompiledFxGraph"
#: config keys of attention-probability dropout (BERT, GPT-2, Llama-style configs)
ATTENTION_DROPOUT_KEYS = ("attention_probs_dropout_prob", "attn_pdrop", "attention_dropout")

#: aten op (or autograd node) name -> class; an op not here takes its caller's class
_BY_NAME = {
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
               "AddmmBackward0", "MmBackward0", "BmmBackward0", "LinearBackward0", "aten::_addmm_activation"),
    "attention": ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                  "aten::_scaled_dot_product_attention_math", "ScaledDotProductFlashAttentionForCpuBackward0"),
    "norm/act/dropout": ("aten::layer_norm", "aten::native_layer_norm", "aten::native_layer_norm_backward",
                         "NativeLayerNormBackward0", "aten::gelu", "aten::gelu_backward", "GeluBackward0",
                         "aten::tanh", "aten::pow", "aten::softmax", "aten::_softmax",
                         "aten::_softmax_backward_data", "aten::dropout", "aten::native_dropout",
                         "aten::native_dropout_backward", "NativeDropoutBackward0", "aten::add", "aten::add_",
                         "AddBackward0", "aten::mul", "MulBackward0", "TanhBackward0", "PowBackward0"),
    "embedding+loss": ("aten::embedding", "aten::embedding_backward", "aten::embedding_dense_backward",
                       "EmbeddingBackward0", "aten::cross_entropy_loss", "aten::log_softmax",
                       "aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::nll_loss",
                       "aten::nll_loss_nd", "aten::nll_loss_forward", "aten::nll_loss_backward",
                       "LogSoftmaxBackward0", "NllLossBackward0", "aten::index_select",
                       "aten::embedding_renorm_"),
}
CLASS_OF = {name: cls for cls, names in _BY_NAME.items() for name in names}
#: FlopCounterMode's op packets (``aten.mm``) -> class
#: (under the counter's dispatch mode ``scaled_dot_product_attention`` takes its math path, whose
#: two ``bmm`` per direction are the attention core; these models' linear layers run mm/addmm)
FLOP_CLASS = {"mm": "matmul", "addmm": "matmul", "bmm": "attention", "baddbmm": "attention",
              "_scaled_dot_product_flash_attention_for_cpu": "attention",
              "_scaled_dot_product_flash_attention_for_cpu_backward": "attention",
              "_scaled_dot_product_efficient_attention": "attention",
              "_scaled_dot_product_efficient_attention_backward": "attention",
              "_scaled_dot_product_flash_attention": "attention",
              "_scaled_dot_product_flash_attention_backward": "attention"}


def _log(level: str, message: str) -> None:
    print(f"   [{level}] {message}", file=sys.stderr)


class Workload:
    """The worker's pieces for one workload file: job, model, optimizer, batches, one step."""

    def __init__(self, path: Path, optimizer_impl: str, compile: bool = False,
                 attention_dropout: float | None = None, inductor_own_random: bool = False) -> None:
        """``compile``: the target's ``optimize { compile = on }`` set, so the plan and the worker's
        ``optimize.apply`` compile the model as a run would.  ``attention_dropout``: a WHAT-IF --
        the model rebuilt with that attention dropout in its config (``with_attention_dropout``).
        ``inductor_own_random``: an EXPERIMENT on a compiled arm -- inductor's ``fallback_random``
        off again after ``optimize.apply`` set it, so the dropout masks come from inductor's
        generated code instead of aten's RNG kernels."""
        import torch

        from accelctl import api
        from accelctl.worker import data, models, optimize
        from accelctl.worker.devices import adapter_for
        from accelctl.worker.train_loop import forward_loss

        spec = api.load_selected(path)[0]
        target = spec.targets[0]
        if compile:
            target = replace(target, optimize=replace(target.optimize, compile=True))
        job = api.plan(spec, target).job
        if job.precision.dtype != "fp32" or job.batch.accumulation != 1 or job.device.adapter != "cpu":
            raise SystemExit(f"{path}: this breakdown covers fp32 CPU workloads without accumulation")
        self.job, self.name = job, spec.name
        self.arm = ("compiled" if compile else "eager") + (
            ", EXPERIMENT inductor's own RNG" if compile and inductor_own_random else "") + (
            "" if attention_dropout is None else f", WHAT-IF attention dropout {attention_dropout:g}")
        torch.set_num_threads(job.threads)
        if compile:  # one compiled model per process, as in the worker (nn.Module.compile shares a code object)
            import torch._inductor.config

            torch._dynamo.reset()
        torch.manual_seed(job.seed)
        adapter = adapter_for(job.device, 0)
        built = models.build(job, _log)
        model = built.model
        if attention_dropout is not None:
            model = with_attention_dropout(model, attention_dropout, job.seed)
        # as train_loop.run: the adapter's preparation, then optimize { ... } (torch.compile in place)
        self.model = optimize.apply(adapter.prepare_training(model.train()), job, _log)
        if compile and inductor_own_random:  # before the first call, which compiles
            torch._inductor.config.fallback_random = False
        self.compiled = job.optimize.compile
        self.kind = built.kind
        self.optimizer = make_optimizer(adapter, job.optimizer, self.model.parameters(), optimizer_impl)
        self.batches = data.training_batches(job, built, 0, 1, _log)
        self.forward_loss = forward_loss
        self.tokens = job.batch.micro * self.batches.tokens_per_sample

    def step(self) -> float:
        """The worker's fp32 step (``train_loop.run``'s ``train_step`` with one micro-batch)."""
        from torch.profiler import record_function

        with record_function("data"):
            batch = next(self.batches)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.forward_loss(self.model, self.kind, batch)
        loss.backward()
        value = float(loss.detach())
        self.optimizer.step()
        return value


def with_attention_dropout(model, p: float, seed: int):
    """WHAT-IF (``--what-if-no-attention-dropout``): the model rebuilt -- same class, same
    config but ``p`` for its attention dropout, weights drawn from the same seed as
    ``models.build`` draws them -- to show what the fused attention kernel would give.  Not
    the model the user trains: the workload's model keeps its dropout."""
    import torch

    config = copy.deepcopy(model.config)
    keys = [k for k in ATTENTION_DROPOUT_KEYS if hasattr(config, k)]
    if not keys:
        raise SystemExit(f"{type(model).__name__}: no attention dropout in its config "
                         f"({', '.join(ATTENTION_DROPOUT_KEYS)})")
    for key in keys:
        setattr(config, key, p)
    torch.manual_seed(seed)
    return type(model)(config)


#: ``--optimizer``: the worker's own (the CPU adapter's: fused AdamW), or AdamW forced to one
#: of torch's implementations (``for-loop``: torch's default on CPU, what the worker used before)
OPTIMIZERS = {"worker": None, "for-loop": {"foreach": False, "fused": False},
              "foreach": {"foreach": True}, "fused": {"fused": True}}


def make_optimizer(adapter, spec, params, impl: str):
    """The adapter's optimizer (``worker``), or AdamW in the implementation ``impl`` names."""
    import torch

    if OPTIMIZERS[impl] is None:
        return adapter.make_optimizer(spec, params)
    if spec.name != "adamw":
        raise SystemExit(f"--optimizer {impl}: AdamW workloads only (this one uses {spec.name})")
    params = [p for p in params if p.requires_grad]
    return torch.optim.AdamW(params, lr=spec.lr, weight_decay=spec.weight_decay, **OPTIMIZERS[impl])


def ceiling(threads: int) -> tuple[float, str]:
    """(fp32 FLOP/s, where from): the stored calibration, else measured now the same way (on
    ``step_clock``: CPU time with one thread)."""
    from accelctl.contract import calibration
    from accelctl.hostinfo import cpu_model

    stored = calibration.lookup(cpu_model(), threads)
    if stored and stored.ceiling("float32"):
        flops, _ = stored.ceiling("float32")
        return flops, f"calibration stored {stored.date} ({stored.method})"
    flops, n = steady_matmul_flops(2048, 2.0, step_clock(threads))
    return flops, (f"measured now: median of {n} 2048x2048 fp32 matmuls over 2 s of "
                   f"{'CPU' if step_clock(threads) is time.thread_time else 'wall'} time (no stored calibration)")


def steady_matmul_flops(n: int, seconds: float, clock) -> tuple[float, int]:
    """``accelctl.worker.calibrate``'s method (median FLOP/s of n x n fp32 matmuls over
    ``seconds`` after a quarter of that as warm-up) on ``clock``."""
    import torch

    a, b, c = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
    warm_until = clock() + seconds / 4
    while clock() < warm_until:
        torch.matmul(a, b, out=c)
    rates: list[float] = []
    end = clock() + seconds
    while clock() < end or len(rates) < 3:
        t0 = clock()
        torch.matmul(a, b, out=c)
        rates.append(2 * n**3 / (clock() - t0))
    return statistics.median(rates), len(rates)


def classify(events) -> dict[str, float]:
    """Self CPU seconds per class over the profiled events (see the module doc)."""
    out = dict.fromkeys(CLASSES, 0.0)
    for ev in events:
        self_s = ev.self_cpu_time_total / 1e6
        if self_s <= 0 or ev.name == "step":
            continue
        out[class_of(ev)] += self_s
    return out


def class_of(ev) -> str:
    chain, node = [], ev
    while node is not None:
        chain.append(node.name)
        node = node.cpu_parent
    if any(n.startswith(("Optimizer.step", "Optimizer.zero_grad")) for n in chain):
        return "optimizer"
    if "data" in chain:
        return "data"
    # the attention core works on [batch, heads, seq, seq|head_dim] tensors: in training
    # scaled_dot_product_attention takes its math path on CPU (attention dropout > 0), so its
    # bmm, softmax, dropout and head reshapes -- forward and backward -- are 4-D ops
    shapes = getattr(ev, "input_shapes", None) or []
    if (shapes and isinstance(shapes[0], (list, tuple)) and len(shapes[0]) == 4) or any(
            n in _BY_NAME["attention"] for n in chain):
        return "attention"
    for name in chain:
        key = name.removeprefix("autograd::engine::evaluate_function: ")
        if key in CLASS_OF:
            return CLASS_OF[key]
        if name.startswith(COMPILED_GRAPH):  # inductor's kernels (an op it calls out to: above)
            return "compiled graph"
    return "copies/views/other ops"


def step_clock(threads: int):
    """The clock steps and the ceiling are timed with: with one thread (all compute on the
    calling thread) its CPU time, which time-slicing with other processes on a shared machine
    does not inflate (equal to wall on a quiet one); with more threads, wall time."""
    return time.thread_time if threads == 1 else time.perf_counter


def breakdown(w: Workload, warmup: int, steps: int, peak: float) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    from accelctl.worker.flops import counter as flops_counter

    from accelctl.worker import optimize

    load_before = os.getloadavg()
    before = optimize.compile_stats()
    for _ in range(warmup):  # a compiled model compiles here (forward on the first, backward too)
        w.step()
    at_measure = optimize.compile_stats()
    clock = step_clock(w.job.threads)
    times, losses = [], []
    for _ in range(steps):
        t0 = clock()
        losses.append(w.step())
        times.append(clock() - t0)
    step_s = statistics.median(times)
    compiles = compiles_between(before, at_measure, optimize.compile_stats()) if w.compiled else {}

    with flops_counter() as counter:  # the worker's counter: it counts sdpa's fused CPU kernel too
        w.step()
    flops_by_class = dict.fromkeys(CLASSES, 0.0)
    flops_by_op = {str(k): float(v) for k, v in counter.get_flop_counts()["Global"].items()}
    for packet, n in counter.get_flop_counts()["Global"].items():
        flops_by_class[FLOP_CLASS.get(str(packet).split(".")[-1], "copies/views/other ops")] += n
    total_flops = float(counter.get_total_flops())

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0, w0 = clock(), time.perf_counter()
        for _ in range(steps):
            with record_function("step"):
                w.step()
        profiled_s, profiled_wall = (clock() - t0) / steps, (time.perf_counter() - w0) / steps
    # the profiler times ops on the wall clock: shares are taken on it, then applied to step_s
    per_class = {k: v / steps for k, v in classify(prof.events()).items()}
    per_class["python/framework"] = max(0.0, profiled_wall - sum(per_class.values()))
    total = sum(per_class.values())

    rows = []
    for cls in CLASSES:
        share = per_class[cls] / total
        seconds = share * step_s
        flops = flops_by_class[cls]
        rows.append({"class": cls, "share": share, "seconds": seconds, "flops": flops,
                     "flops_per_s": flops / seconds if flops and seconds else None,
                     "of_ceiling": flops / seconds / peak if flops and seconds else None,
                     "mfu_without_it": total_flops / max(step_s - seconds, 1e-9) / peak})
    sdpa = sorted({ev.name.removeprefix("aten::") for ev in prof.events()
                   if ev.name.startswith("aten::_scaled_dot_product") and "backward" not in ev.name})
    return {"workload": w.name, "arm": w.arm, "threads": w.job.threads, "torch_threads": torch.get_num_threads(),
            "sdpa_kernels": sdpa, "compile": compiles, "load_average": [load_before, os.getloadavg()],
            "step_s": step_s, "step_s_spread": [min(times), max(times)], "profiled_step_s": profiled_s,
            "flops_per_step": total_flops, "achieved_flops_per_s": total_flops / step_s,
            "mfu": total_flops / step_s / peak, "tokens_per_step": w.tokens,
            "losses": losses, "flops_by_op": flops_by_op, "classes": rows}


def compiles_between(before: dict, at_measure: dict, after: dict) -> dict:
    """This arm's compiles (``optimize.compile_stats`` counts the process's): in its warm-up,
    and after it (recompiles in the timed steps)."""
    def n(d):
        return d.get("compiles", 0), d.get("compile_s", 0.0)

    (b, b_s), (m, m_s), (a, a_s) = n(before), n(at_measure), n(after)
    return {"warmup_compiles": m - b, "warmup_compile_s": m_s - b_s, "recompiles": a - m, "recompile_s": a_s - m_s}


def show(r: dict, peak: float) -> None:
    print(f"\n{r['workload']} [{r['arm']}]: step {r['step_s'] * 1e3:.1f} ms median ({r['step_s_spread'][0] * 1e3:.1f}-"
          f"{r['step_s_spread'][1] * 1e3:.1f}), profiled {r['profiled_step_s'] * 1e3:.1f} ms; "
          f"{r['flops_per_step'] / 1e9:.2f} GFLOP/step, {r['achieved_flops_per_s'] / 1e9:.1f} GFLOP/s, "
          f"MFU {r['mfu']:.3f} of {peak / 1e9:.1f} GFLOP/s")
    print(f"  sdpa kernel: {', '.join(r['sdpa_kernels']) or 'none (decomposed into the compiled graph)'}; "
          f"load average {r['load_average'][0][0]:.1f} -> {r['load_average'][1][0]:.1f}"
          + (f"; {_compile_text(r['compile'])}" if r["compile"] else ""))
    if "EXPERIMENT" in r["arm"]:
        print("  EXPERIMENT: inductor's own dropout RNG is not what optimize { compile = on } runs on a CPU")
    if "WHAT-IF" in r["arm"]:
        print("  WHAT-IF: an experiment that explains the gap, not the model the workload trains "
              "(its attention dropout stays as configured)")
    print(f"  {'class':<24}{'share':>7}{'ms':>8}{'GFLOP':>8}{'GFLOP/s':>9}{'of ceil':>9}{'MFU w/o':>9}")
    for row in r["classes"]:
        if not row["share"] and row["class"] == "compiled graph":
            continue
        fl = f"{row['flops'] / 1e9:8.2f}" if row["flops"] else f"{'':>8}"
        rate = f"{row['flops_per_s'] / 1e9:9.1f}{row['of_ceiling']:9.2f}" if row["flops_per_s"] else f"{'':>18}"
        print(f"  {row['class']:<24}{row['share']:7.1%}{row['seconds'] * 1e3:8.1f}{fl}{rate}"
              f"{row['mfu_without_it']:9.3f}")


def _compile_text(c: dict) -> str:
    return (f"compiled {c.get('warmup_compiles', 0)} graph(s) in warm-up ({c.get('warmup_compile_s', 0.0):.1f} s, "
            f"not in the step), {c.get('recompiles', 0)} recompile(s) after")


def compare(results: list[dict]) -> None:
    """One line per arm of each workload: step, MFU, step vs the eager arm, and where the step goes."""
    print(f"\n{'workload [arm]':<62}{'step ms':>8}{'MFU':>7}{'x eager':>8}"
          f"{'GEMMs':>7}{'attn':>7}{'elementwise':>12}")
    for r in results:
        eager = next(e for e in results if e["workload"] == r["workload"] and e["arm"] == "eager")
        share = {row["class"]: row["share"] for row in r["classes"]}
        print(f"{r['workload'] + ' [' + r['arm'] + ']':<62}{r['step_s'] * 1e3:8.1f}{r['mfu']:7.3f}"
              f"{eager['step_s'] / r['step_s']:8.2f}{share['matmul']:7.0%}{share['attention']:7.0%}"
              f"{share['norm/act/dropout'] + share['compiled graph']:12.0%}")
    print("(x eager: the eager step over this arm's; elementwise: layer norm, GELU, dropout, residual adds"
          " -- in a compiled arm the compiled graph's own kernels, which also hold the attention softmax/dropout)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/mfu_breakdown.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", type=Path, default=WORKLOADS, help="fp32 CPU workload files")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="worker",
                    help="AdamW implementation: the worker's own (fused on CPU), or torch's for-loop / "
                         "foreach / fused forced")
    ap.add_argument("--compile", action="store_true",
                    help="also each workload compiled as optimize { compile = on } compiles it (warm-up "
                         "steps compile; --warmup >= 2)")
    ap.add_argument("--what-if-no-attention-dropout", action="store_true",
                    help="WHAT-IF arm: the model with attention dropout 0 in its config, so sdpa may take "
                         "its fused CPU kernel -- an experiment, not the model the workload trains")
    ap.add_argument("--inductor-own-random", action="store_true",
                    help="EXPERIMENT for the --compile arms: dropout masks from inductor's generated code, "
                         "not aten's RNG (fallback_random, which optimize { compile = on } sets on a CPU)")
    ap.add_argument("--json", type=Path, metavar="OUT")
    args = ap.parse_args(argv)
    if args.compile and args.warmup < 2:
        ap.error("--compile needs --warmup >= 2 (the first steps compile)")

    from accelctl.hostinfo import cpu_bf16_flags, cpu_model

    arms = [(c, d) for c in (False, True)[:1 + args.compile]
            for d in (None, 0.0)[:1 + args.what_if_no_attention_dropout]]
    results, peak, source = [], None, ""
    for path in args.workloads:
        for compiled, dropout in arms:
            w = Workload(path, args.optimizer, compile=compiled, attention_dropout=dropout,
                         inductor_own_random=args.inductor_own_random)
            if peak is None:
                peak, source = ceiling(w.job.threads)
                print(f"{cpu_model()} (bf16 flags: {' '.join(cpu_bf16_flags()) or 'none'}); "
                      f"ceiling {peak / 1e9:.1f} GFLOP/s fp32 at {w.job.threads} thread(s): {source}; "
                      f"optimizer {args.optimizer}")
            r = breakdown(w, args.warmup, args.steps, peak)
            show(r, peak)
            results.append(r)
    if len(arms) > 1:
        compare(results)
    if args.json:
        args.json.write_text(json.dumps({"ceiling_flops": peak, "ceiling_source": source, "cpu": cpu_model(),
                                         "optimizer": args.optimizer, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

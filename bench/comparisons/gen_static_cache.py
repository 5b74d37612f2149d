"""Greedy generation, 100 tokens, BLOOM stand-in: ``accelctl run`` with ``kv_cache = static`` and
``optimize { compile = on }`` (the decoding step compiled once, in warm-up) vs the bare
transformers loop with its default dynamic cache, eager (``step_s``: one generate() call; both
under ``torch.inference_mode()``).  Quick mode keeps 2 warm-up calls (E225)."""

from bench.accelctl_arm import run_accelctl, sized_workload
from bench.baseline_arm import run_baseline
from bench.harness import BENCH, Comparison, Setup


def _setup(quick, workdir):
    warmup, steps = (2, 2) if quick else (2, 5)
    wl = sized_workload(BENCH / "workloads" / "gen_static.wl", workdir, warmup, steps)
    args = ["--family", "bloom", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "1000",
            "--prompt-tokens", "41", "--new-tokens", "100", "--warmup", str(warmup), "--steps", str(steps),
            "--threads", "1"]
    arch = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 1000}
    return Setup(a=lambda core: run_accelctl(wl, workdir, core, expect=arch),
                 b=lambda core: run_baseline("generate.py", args, core),
                 a_label="accelctl run bench/workloads/gen_static.wl (kv_cache = static, compile = on)",
                 b_label="bare generation, dynamic cache (bench/baselines/generate.py)",
                 metrics={"step_s": "one generate() call, median", "wall_s": "whole run, start to exit"})


COMPARISON = Comparison(name="gen_static_cache", title="greedy 100 tokens, accelctl static KV cache + compile vs "
                                                       "bare dynamic-cache loop", setup=_setup, pairs=4, quick_pairs=2)

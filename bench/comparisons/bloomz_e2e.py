"""``accelctl run workloads/bloomz.wl`` end to end (its two workloads' cpu targets: a 2-layer
BLOOM stand-in, greedy, 100 new tokens) vs two bare generation processes one after the
other.  The headline is the whole wall; ``step_s`` is one generate() call.  The stand-in's
shape is what ``accelctl plan workloads/bloomz.wl -t cpu`` puts in job.json (vocab 1000)."""

from bench.accelctl_arm import run_accelctl, sized_workload
from bench.baseline_arm import run_baseline
from bench.harness import ROOT, Comparison, Setup


def _setup(quick, workdir):
    warmup, steps = (1, 2) if quick else (2, 5)
    wl = sized_workload(ROOT / "workloads" / "bloomz.wl", workdir, warmup, steps)
    args = ["--family", "bloom", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "1000",
            "--prompt-tokens", "41", "--new-tokens", "100", "--warmup", str(warmup), "--steps", str(steps),
            "--threads", "1"]
    arch = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 1000}
    return Setup(a=lambda core: run_accelctl(wl, workdir, core, expect=arch),
                 b=lambda core: run_baseline("generate.py", args, core, repeat=2),
                 a_label="accelctl run workloads/bloomz.wl (2 workloads)",
                 b_label="2 bare generation processes (bench/baselines/generate.py)",
                 metrics={"wall_s": "whole run, start to exit", "step_s": "one generate() call, median"})


COMPARISON = Comparison(name="bloomz_e2e", title="accelctl run workloads/bloomz.wl end to end vs bare processes",
                        setup=_setup, pairs=4, quick_pairs=2)

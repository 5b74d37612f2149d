"""The bench suite (``python -m bench``): its report's shape, its statistics and its README
block.  No timing is asserted anywhere: timings belong to the suite's own runs, not to tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import readme  # noqa: E402
from bench.accelctl_arm import sized_workload  # noqa: E402
from bench.harness import PairLog, Setup, bootstrap_interval, run_pairs, summarize, verdict  # noqa: E402


@pytest.mark.slow
def test_quick_cli_comparison_reports_every_field(tmp_path):
    out = tmp_path / "report.json"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    cp = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", "cli_validate", "--json", str(out)],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["quick"] is True
    assert {"cpu_model", "cpu_flags", "cores", "loadavg_start", "loadavg_end"} <= set(report["host"])
    (comp,) = report["comparisons"]
    assert comp["name"] == "cli_validate" and comp["status"] == "ok"
    s = comp["metrics"]["wall_s"]
    assert s["n"] == 3 == len(s["ratios"]) == len(comp["raw"]["a"]) == len(comp["raw"]["b"])
    assert s["ratio_min"] <= s["ratio_median"] <= s["ratio_max"]
    lo, hi = s["ci95"]
    assert s["ratio_min"] <= lo <= hi <= s["ratio_max"]
    assert s["verdict"] == verdict((lo, hi))
    assert comp["raw"]["order"] == ["a b", "b a", "a b"]  # alternating order
    assert "wall_s: ratio" in cp.stdout


def test_unknown_comparison_is_refused():
    cp = subprocess.run([sys.executable, "-m", "bench", "--only", "no_such"], cwd=ROOT, capture_output=True,
                        text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 2 and "invalid choice" in cp.stderr


@pytest.mark.parametrize(("ratios", "expected"), [
    ([0.90, 0.92, 0.91, 0.93, 0.90, 0.94], "faster"),
    ([1.10, 1.12, 1.11, 1.09, 1.13, 1.10], "slower"),
    ([0.95, 1.05, 1.00, 0.97, 1.04, 1.02], "no difference shown"),
])
def test_verdict_follows_the_bootstrap_interval(ratios, expected):
    ci = bootstrap_interval(ratios)
    assert ci is not None and ci[0] <= sorted(ratios)[len(ratios) // 2] <= ci[1]
    assert verdict(ci) == expected


def test_too_few_pairs_give_no_interval_and_no_verdict():
    assert bootstrap_interval([0.5, 0.6]) is None
    assert verdict(None) is None
    log = PairLog(a=[{"t": 1.0}, {"t": 2.0}], b=[{"t": 2.0}, {"t": 2.0}])
    s = summarize(log, "t")
    assert s["n"] == 2 and s["ci95"] is None and s["verdict"] is None and s["ratio_median"] == 0.75


def test_same_model_compares_what_both_arms_report():
    from bench.harness import same_model

    log = PairLog(a=[{"params": 10, "first_loss": 6.9}, {"params": 10, "first_loss": 6.9}],
                  b=[{"params": 10, "first_loss": 6.9 + 1e-7}, {"params": 10, "first_loss": 6.9}])
    assert same_model(log) == {"params": True, "first_loss": True}
    log.b[1]["first_loss"] = 6.8
    assert same_model(log) == {"params": True, "first_loss": False}
    log.b[0]["params"] = 11
    assert same_model(log)["params"] is False
    assert same_model(PairLog(a=[{"params": 10}], b=[{"step_s": 1.0}])) is None


def test_pairs_alternate_order_and_swap_cores_when_pinned():
    import os

    seen = []

    def arm(name):
        def run(core):
            seen.append((name, core, os.sched_getaffinity(0)))
            return {"t": 1.0}
        return run

    setup = Setup(a=arm("a"), b=arm("b"), a_label="a", b_label="b", metrics={"t": ""})
    log = run_pairs(setup, 4, pin=False)
    assert log.order == ["a b", "b a", "a b", "b a"] and log.cores == [(None, None)] * 4
    seen.clear()
    log = run_pairs(setup, 2, pin=True)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:
        assert log.cores == [(cores[0], cores[1]), (cores[1], cores[0])]
        assert log.order == ["a|b", "a|b"]
    else:
        assert log.cores == [(None, None)] * 2


def test_sized_workload_sets_every_measure_block(tmp_path):
    src = ROOT / "workloads" / "bloomz.wl"
    out = sized_workload(src, tmp_path, 1, 2)
    text = out.read_text()
    assert "warmup = 1 steps  steps = 2 steps" in text
    assert "steps = 5 steps" not in text and "warmup = 3 steps" not in text
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "validate", str(out)], cwd=ROOT, capture_output=True,
                        text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_readme_block_is_rewritten_between_its_markers(tmp_path):
    md = tmp_path / "README.md"
    md.write_text(f"# x\nbefore\n{readme.BEGIN}\nold table\n{readme.END}\nafter\n")
    s = {"ratio_median": 1.02, "ratio_min": 0.98, "ratio_max": 1.07, "n": 5, "ci95": [0.99, 1.05],
         "verdict": "no difference shown"}
    report = {"command": "python -m bench --quick", "date": "2026-11-23 14:00 UTC", "quick": True, "pin": False,
              "host": {"cpu_model": "Some CPU", "cpu_flags": ["avx2"], "cores": 2, "loadavg_start": [5.0]},
              "comparisons": [{"title": "BERT step", "status": "ok", "metrics": {"step_s": s}},
                              {"title": "vs Accelerate", "status": "not run: accelerate not installed"}]}
    readme.write(md, report)
    text = md.read_text()
    assert text.startswith("# x\nbefore\n") and text.endswith("\nafter\n") and "old table" not in text
    assert "| BERT step | step_s | 1.020 (0.98–1.07, n=5) | [0.990, 1.050] | no difference shown |" in text
    assert "not run: accelerate not installed" in text and "quick run" in text and "Some CPU" in text
    assert "avx2" in text and "`python -m bench --quick`" in text and "loaded machine" in text


def test_a_pinned_child_runs_on_its_core_only():
    import os

    from bench.harness import run_timed

    cores = sorted(os.sched_getaffinity(0))
    code = "import os, time; time.sleep(0.3); print(sorted(os.sched_getaffinity(0)))"
    _, _, out = run_timed([sys.executable, "-c", code], cores[-1], 60)
    assert out.strip() == f"[{cores[-1]}]"
    _, _, out = run_timed([sys.executable, "-c", code], None, 60)
    assert out.strip() == str(cores)


def test_a_baseline_of_another_shape_is_refused(tmp_path):
    from bench.accelctl_arm import check_architecture

    (tmp_path / "job.json").write_text(json.dumps({"architecture": {"layers": 4, "hidden": 256, "ffn": 256}}))
    check_architecture(tmp_path, {"layers": 4, "hidden": 256})
    with pytest.raises(RuntimeError, match="ffn"):
        check_architecture(tmp_path, {"layers": 4, "ffn": 1024})


@pytest.mark.parametrize("name", ["bert_accelerate", "bert_accelerate_ddp"])
def test_accelerate_comparison_without_accelerate_is_reported_not_run(tmp_path, name):
    """Run where accelerate is installed too: the bench's own ``main`` in a process whose
    ``import accelerate`` is blocked (``sys.modules[name] = None``: ``find_spec`` says None)."""
    out = tmp_path / "report.json"
    code = ("import sys; sys.modules['accelerate'] = None; from bench.__main__ import main; "
            f"sys.exit(main(['--quick', '--only', {name!r}, '--json', {str(out)!r}]))")
    cp = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (comp,) = json.loads(out.read_text())["comparisons"]
    assert comp["name"] == name
    assert comp["status"].startswith("not run: accelerate not installed") and "metrics" not in comp
    assert "pip install -e '.[bench]'" in comp["status"]


def _python(code: str) -> str:
    """What ``python -c code`` prints, run from the repository root with only it on the path."""
    cp = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0, cp.stderr[-2000:]
    return cp.stdout.strip()


@pytest.mark.slow
def test_the_fused_comparison_differs_from_bert_step_in_the_optimizer_only(tmp_path):
    """``bert_step_fused`` reuses ``bert_step``'s setup; its baseline adds the flags that build
    accelctl's CPU optimizer, which the baseline turns into a fused AdamW without weight decay."""
    from bench.comparisons import BY_NAME

    plain, fused = (BY_NAME[n].setup(True, tmp_path) for n in ("bert_step", "bert_step_fused"))
    assert plain.a_label == fused.a_label and plain.b_label != fused.b_label
    code = ("import argparse, sys, torch; sys.path.insert(0, 'bench/baselines'); "
            "from _common import add_optimizer_args, adamw; ap = argparse.ArgumentParser(); "
            "ap.add_argument('--lr', type=float, default=1e-3); add_optimizer_args(ap); "
            "from bench.comparisons.bert_step_fused import LIKE_ACCELCTL_OPTIMIZER as F; "
            "d = [adamw(torch.nn.Linear(2, 2).parameters(), ap.parse_args(a)).defaults for a in ([], list(F))]; "
            "print([(x['fused'], x['weight_decay']) for x in d])")
    assert _python(code) == "[(None, 0.01), (True, 0.0)]"  # torch's default AdamW, then the worker's


@pytest.mark.slow
def test_the_ddp_baseline_runs_two_gloo_ranks_under_the_comparisons_launch():
    """``accelerate launch --cpu --num_processes 2`` starts ONE process (accelerate 1.15); the
    comparison's launch must start two MULTI_CPU ranks, and the baseline refuses fewer."""
    pytest.importorskip("accelerate")
    from bench.baseline_arm import BASELINES
    from bench.comparisons.bert_accelerate_ddp import LAUNCH
    from bench.harness import base_env

    tiny = ["--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "16", "--warmup", "0", "--steps", "2",
            "--expect-processes", "2"]
    cp = subprocess.run([*LAUNCH, "accelerate_bert.py", *tiny], cwd=BASELINES, env=base_env(),
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    result = json.loads(next(x for x in cp.stdout.splitlines() if x.startswith("{")))
    assert result["processes"] == 2 and result["distributed_type"] == "DistributedType.MULTI_CPU"
    assert len(result["step_times"]) == 2
    one = [*LAUNCH[:LAUNCH.index("--multi_gpu")], "--cpu", *LAUNCH[LAUNCH.index("--num_processes"):]]
    cp = subprocess.run([*one, "accelerate_bert.py", *tiny], cwd=BASELINES, env=base_env(),
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode != 0 and "1 process(es) (DistributedType.NO), expected 2" in cp.stdout + cp.stderr


@pytest.mark.slow
def test_bert_step_fused_baseline_builds_the_optimizer_accelctls_worker_builds():
    """What ``bert_step_fused`` assumes of the worker: for bench/workloads/bert_mlm.wl's job
    (as ``accelctl plan`` renders it) the CPU worker builds a fused AdamW without weight
    decay -- the optimizer ``LIKE_ACCELCTL_OPTIMIZER`` makes the baseline build."""
    code = ("import json, subprocess, sys, torch; "
            "from accelctl.contract.job import WorkerJob; from accelctl.worker.devices import adapter_for; "
            "out = subprocess.run([sys.executable, '-m', 'accelctl.cli', 'plan', 'bench/workloads/bert_mlm.wl', "
            "'-f', 'json'], capture_output=True, text=True, check=True).stdout; "
            "job = WorkerJob.from_dict(json.loads(out)['result']['plans'][0]['plan']['job']); "
            "opt = adapter_for(job.device, 0).make_optimizer(job.optimizer, torch.nn.Linear(2, 2).parameters()); "
            "d = opt.defaults; print(type(opt).__name__, d['fused'], d['weight_decay'], d['lr'])")
    assert _python(code) == "AdamW True 0.0 0.001"


def test_every_comparison_is_named_once_and_runs_full_and_quick_pairs():
    """The suite's list: ``--only`` names are unique (the worker-alone and GPT-2 comparisons
    among them), and every comparison has its pairs for an interval and a cheaper quick run."""
    from bench.comparisons import ALL, BY_NAME

    names = [c.name for c in ALL]
    assert len(names) == len(set(names)) == len(BY_NAME)
    assert {"bert_step", "bert_step_fused", "bert_worker_fused", "gpt2_step", "llama_fsdp", "llama_tp"} <= set(names)
    for c in ALL:
        assert c.pairs >= 3 and 1 <= c.quick_pairs <= c.pairs, c.name


def _events_of(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "rank0.jsonl").read_text().splitlines() if x.strip()]


@pytest.mark.slow
def test_the_worker_arm_runs_the_planned_job_alone_in_its_own_run_folder(tmp_path):
    """``bert_worker_fused``'s accelctl arm: the worker process only (no CLI, no runner, no runs
    folder), on bert_mlm.wl's planned job sized for ``--quick``, writing its events into a run
    folder of its own; its step figure is the measured steps' median, as for ``accelctl run``."""
    from bench.comparisons import BY_NAME

    setup = BY_NAME["bert_worker_fused"].setup(True, tmp_path)
    first, second = setup.a(None), setup.a(None)
    runs = sorted(tmp_path.glob("worker-*"))
    assert len(runs) == 2 and not list(tmp_path.glob("runs-*"))
    medians = []
    for run in runs:
        job = json.loads((run / "job.json").read_text())
        assert job["events_dir"] == str(run) and job["architecture"]["ffn"] == 1024
        measured = sorted(e["step_time_s"] for e in _events_of(run) if e["kind"] == "step"
                          and e.get("phase") == "measure")
        assert len(measured) == 3  # QUICK: 1 warm-up step, 3 measured
        medians.append(measured[1])
    assert sorted(medians) == sorted([first["step_s"], second["step_s"]])
    assert min(first["wall_s"], second["wall_s"]) > max(medians)


@pytest.mark.slow
def test_the_gpt2_baseline_builds_the_model_accelctls_worker_builds(tmp_path):
    """``gpt2_step``'s two arms train one model: the bare loop's ``GPT2LMHeadModel`` has as many
    parameters as the one the worker builds for bench/workloads/gpt2_clm.wl's job (a feed-forward,
    position table or vocabulary of another size would change the count), and the job has the
    dimensions the comparison checks."""
    from bench.accelctl_arm import check_architecture, planned_job, run_worker, sized_workload
    from bench.baseline_arm import BASELINES
    from bench.comparisons.gpt2_step import ARCH, SHAPE
    from bench.harness import base_env, run_timed

    wl = sized_workload(ROOT / "bench" / "workloads" / "gpt2_clm.wl", tmp_path, 0, 1)
    job, env = planned_job(wl)
    run_worker(job, env, tmp_path, None, expect=ARCH)
    (run,) = tmp_path.glob("worker-*")
    check_architecture(run, ARCH)
    started = next(e for e in _events_of(run) if e["kind"] == "run_started")
    _, _, out = run_timed([sys.executable, str(BASELINES / "gpt2_clm.py"), *SHAPE, "--warmup", "0", "--steps", "1"],
                          None, 300, env=base_env(), cwd=BASELINES)
    bare = json.loads(out.strip().splitlines()[-1])
    assert len(bare["step_times"]) == 1
    assert bare["params"] == started["details"]["params"] > 0


@pytest.mark.parametrize("name,target", [("llama_fsdp", "fsdp"), ("llama_tp", "tp")])
def test_the_parallel_comparisons_run_their_target_against_the_baselines_layout(tmp_path, name, target):
    """``llama_fsdp`` / ``llama_tp``: accelctl runs the workload's target of that layout, the
    bare script the same layout, under a 2-rank torchrun, with the shape the job is checked
    against (every ``--key value`` of the baseline's shape is the job architecture's key)."""
    import inspect

    from bench.comparisons import BY_NAME, llama_fsdp

    setup = BY_NAME[name].setup(True, tmp_path)
    assert not setup.pinnable and set(setup.metrics) == {"step_s", "wall_s"}
    arms = inspect.getclosurevars(setup.a).nonlocals
    assert arms["extra"] == ("-t", target) and arms["arch"] == llama_fsdp.ARCH
    args, launcher = (inspect.getclosurevars(setup.b).nonlocals[k] for k in ("args", "launcher"))
    assert args[args.index("--parallel") + 1] == target
    assert launcher[launcher.index("--nproc-per-node") + 1] == "2"
    shape = dict(zip(llama_fsdp.SHAPE[::2], llama_fsdp.SHAPE[1::2]))
    arch = {k.removeprefix("--").replace("-", "_"): int(v) for k, v in shape.items()
            if k.removeprefix("--").replace("-", "_") in llama_fsdp.ARCH}
    assert arch == {k: v for k, v in llama_fsdp.ARCH.items() if k != "tied"}


@pytest.mark.slow
@pytest.mark.parametrize("name,strategy", [("llama_fsdp", "fsdp"), ("llama_tp", "tensor")])
def test_the_parallel_baseline_trains_the_model_accelctl_trains(tmp_path, name, strategy):
    """The two arms of ``llama_fsdp`` / ``llama_tp`` as ``python -m bench --quick`` runs them
    (1 warm-up + 3 steps, 2 gloo ranks each): the bare script's model has the parameter count
    of the one accelctl's worker builds, and the first loss (the same weights on the same
    batches) and the last (after 3 AdamW steps: the same optimizer) are equal."""
    from bench.comparisons import BY_NAME

    setup = BY_NAME[name].setup(True, tmp_path)
    a, b = setup.a(None), setup.b(None)
    (run,) = tmp_path.glob("runs-*/*-bench_llama_2ranks-*")
    job = json.loads((run / "job.json").read_text())
    assert job["parallel"]["strategy"] == strategy and job["strategy"] == "sharded"
    assert {json.loads(x)["rank"] for x in (run / "rank1.jsonl").read_text().splitlines() if x.strip()} == {1}
    assert a["params"] == b["params"] > 0
    assert a["first_loss"] == pytest.approx(b["first_loss"], abs=1e-5)
    assert a["final_loss"] == pytest.approx(b["final_loss"], abs=1e-5)
    assert a["final_loss"] < a["first_loss"]
    assert a["step_s"] > 0 and b["step_s"] > 0

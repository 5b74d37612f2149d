"""Everything the language accepts either runs or is refused before launch (issue 23 item 2),
walked from the schema's own tables (``schema_walk``): the fast part gives every key and value
its verdict before launch (no torch: validate, plan, the rehearsal's plan) -- a refusal is
positioned, and validate and plan agree on it; the slow part runs every workload whose verdict
is "runs" for real, one per distinct plan (cases whose runner and worker get the same plan run
once; a rehearsal whose worker job is a cpu case's but for its label runs once, as that case),
in five parts that xdist spreads (``SHARDS``: one process, compiled, launched in two, the
rehearsals), the one-process ones of a part in one shared worker, and none fails at run time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from schema_walk import Case, cases, verdict

from accelctl import api

ROOT = Path(__file__).resolve().parents[2]
CASES = cases()


def _walk(tmp_path) -> list[tuple[Case, object]]:
    (tmp_path / "walk.txt").write_text("a line of text to train on\n" * 64, encoding="utf-8")
    out = []
    for i, case in enumerate(CASES):
        out.append((case, verdict(case, tmp_path / f"{i}.wl")))
    return out


def test_every_key_and_value_has_a_verdict_before_launch_and_every_refusal_is_positioned(tmp_path):
    walked = _walk(tmp_path)
    assert len(walked) > 300  # the walk is the schema's, not a handful
    for case, v in walked:
        for d in v.refused:
            assert d.span is not None and d.code and d.message, (case.id, d)
    runs = [c for c, v in walked if not v.refused]
    refused = [c for c, v in walked if v.refused]
    assert runs and refused
    # what issue 23 names: refused at their line, before anything is launched
    by_id = {c.id: v for c, v in walked}
    assert len(by_id) == len(walked), "two cases of the walk share an id"
    for gone in ("parallel.strategy=fsdp@gaudi2/pretrain", "parallel.strategy=tensor@gaudi2/pretrain",
                 "parallel.strategy=pipeline@gaudi2/pretrain",
                 "precision.dtype=fp8@gaudi2/pretrain"):
        assert by_id[gone].refused, gone
    # lamb runs (timm's Lamb); FSDP, tensor and pipeline parallel train through torchrun (issue 24)
    for runs_ in ("optimizer.name=lamb@cpu/pretrain", "parallel.strategy=fsdp@a100/pretrain",
                  "parallel.strategy=tensor@a100/pretrain", "parallel.strategy=pipeline@a100/pretrain",
                  "parallel.strategy=fsdp@cpu/pretrain"):
        assert not by_id[runs_].refused, (runs_, by_id[runs_].refused)


def _one_file(cases_: list[Case], path: Path) -> Path:
    path.write_text("\n".join(c.text for c in cases_), encoding="utf-8")
    return path


def _same_plan_key(case: Case, path: Path, rehearse: bool) -> str:
    """What the runner and the worker are given for ``case`` (its plan: launches, files, job,
    tracking; not what is only printed and stored beside them: the notes, the warnings, a
    rehearsal's label -- the device it stands for), with the workload's name taken out: two
    cases with one key run the same job, so one run of it proves both."""
    (spec,) = api.load(path)
    plan_ = api.plan(spec, spec.targets[0], rehearse=rehearse, device_path=rehearse)
    d = plan_.to_dict()
    for shown in ("notes", "warnings", "workload", "rehearsal"):
        d.pop(shown, None)
    return re.sub(rf"\b{re.escape(spec.name)}\b", "<workload>", json.dumps(d, sort_keys=True))


def distinct_plans(walked, tmp_path: Path, rehearse: bool) -> dict[str, list[Case]]:
    """The cases that run (``rehearse``: as rehearsals of their accelerator target, else on
    this CPU), grouped by the plan they run: each group's first case stands for the group."""
    groups: dict[str, list[Case]] = {}
    for i, (case, v) in enumerate(walked):
        if not v.refused and v.rehearse == rehearse:
            groups.setdefault(_same_plan_key(case, tmp_path / f"{i}.wl", rehearse), []).append(case)
    return groups


def test_cases_with_one_plan_share_it_and_different_plans_differ(tmp_path):
    """The slow walk runs one case per distinct plan: the grouping must join only equal plans
    (a case's own key is stable) and keep apart what runs differently."""
    walked = _walk(tmp_path)
    by_id = {c.id: i for i, (c, _) in enumerate(walked)}
    groups = distinct_plans(walked, tmp_path, rehearse=False)
    group_of = {c.id: key for key, cs in groups.items() for c in cs}
    # spellings of one job: the workload-level and the target-level switch; the default and its value
    assert group_of["workload.gradient_checkpointing=on@cpu/pretrain"] == \
        group_of["target.gradient_checkpointing=on@cpu/pretrain"]
    assert group_of["parallel.strategy=zero@cpu/pretrain"] == group_of["parallel.zero.stage=0@cpu/pretrain"]
    # jobs that differ are run apart
    for a, b in (("workload.gradient_checkpointing=on@cpu/pretrain", "workload.gradient_checkpointing=off@cpu/pretrain"),
                 ("parallel.strategy=zero@cpu/pretrain", "parallel.strategy=fsdp@cpu/pretrain"),
                 ("optimize.compile=on@cpu/pretrain", "optimize.compile=off@cpu/pretrain")):
        assert group_of[a] != group_of[b], (a, b)
    case = walked[by_id["parallel.strategy=fsdp@cpu/pretrain"]][0]
    assert _same_plan_key(case, tmp_path / f"{by_id[case.id]}.wl", False) == group_of[case.id]
    assert len(groups) < len(group_of)  # the cut the slow walk makes
    # a rehearsal of an a100 and of a gaudi2 target with one job on this CPU runs once
    rehearsals = distinct_plans(walked, tmp_path, rehearse=True)
    group_of = {c.id: key for key, cs in rehearsals.items() for c in cs}
    assert group_of["parallel.zero.stage=1@a100/pretrain"] == group_of["parallel.zero.stage=1@gaudi2/pretrain"]
    assert group_of["parallel.zero.stage=1@a100/pretrain"] != group_of["parallel.zero.stage=2@a100/pretrain"]


def _as_run_here(key: str) -> str | None:
    """A rehearsal's plan key as the key of the same job run on this CPU: its job's label
    (``rehearsal_of``, the target it stands for) blanked.  None where the worker branches on that
    label (``accelctl/worker``: an FP8 target's rehearsal picks the FP8 loop, a rehearsal drops real
    weights for random ones): such a rehearsal runs as itself."""
    d = json.loads(key)
    job = d["job"]
    if job["precision"]["fp8"] is not None or job["model"]["weights"] not in ("random", "stand_in"):
        return None
    job["rehearsal_of"] = ""
    return json.dumps(d, sort_keys=True)


#: the slow walk's parts, each its own test (xdist runs them side by side), longest first as
#: measured: the compiled plans (torch.compile in each mode), the plans launched as several
#: processes (torchrun, DeepSpeed) in two halves, the one-process plans, the rehearsals
LAUNCHED_PARTS = 2
SHARDS = ("cpu_compiled", *(f"cpu_launched_{i + 1}" for i in range(LAUNCHED_PARTS)), "cpu_one_process",
          "rehearsals")


def _part(key: str) -> str:
    d = json.loads(key)
    if d["job"]["optimize"]["compile"]:
        return "compiled"
    return "one_process" if [(ln["name"], ln["processes"]) for ln in d["launches"]] == [("worker", 1)] else "launched"


#: torch.compile's modes that compile the same on a CPU: each differs from the mode it maps to
#: only by ``triton.cudagraphs`` (``torch._inductor.list_mode_options``), which CUDA graphs use and
#: a CPU graph skips; the worker passes the mode to ``torch.compile`` and otherwise only prints it
#: (``accelctl/worker/optimize.py``).  The compiled part runs one of each pair; the slow test checks
#: the table against the installed torch's.
SAME_ON_CPU = {"reduce-overhead": "default", "max-autotune-no-cudagraphs": "max-autotune"}


def _compiled_here(key: str) -> str:
    """A cpu plan's key with its compile mode as the mode that compiles the same on a CPU."""
    d = json.loads(key)
    opt = d["job"]["optimize"]
    opt["compile_mode"] = SAME_ON_CPU.get(opt["compile_mode"], opt["compile_mode"])
    return json.dumps(d, sort_keys=True)


def shards(walked, tmp_path: Path) -> dict[str, list[list[Case]]]:
    """The plans the slow walk runs, by part (``SHARDS``): each a group of cases with one plan,
    its first case run for the group.  A rehearsal whose job, label aside, is a cpu group's
    (``_as_run_here``) joins that group: the worker runs the same job, and the runner's own
    rehearsal steps (the target it picks, no preflight world) are the other rehearsals'."""
    here = distinct_plans(walked, tmp_path, rehearse=False)
    out: dict[str, list[list[Case]]] = {s: [] for s in SHARDS}
    for key, cs in distinct_plans(walked, tmp_path, rehearse=True).items():
        same = _as_run_here(key)
        if same in here:
            here[same] = here[same] + cs
        else:
            out["rehearsals"].append(cs)
    merged: dict[str, list[Case]] = {}
    for key, cs in here.items():
        if _part(key) == "compiled":  # every plan of `here` runs on this CPU
            key = _compiled_here(key)
        merged[key] = merged.get(key, []) + cs
    launched = 0
    for key, cs in merged.items():
        part = _part(key)
        if part == "launched":
            launched += 1
            part += f"_{(launched - 1) % LAUNCHED_PARTS + 1}"
        out[f"cpu_{part}"].append(cs)
    return out


def test_the_slow_walks_parts_run_every_case_once_and_rehearse_what_the_worker_branches_on(tmp_path):
    walked = _walk(tmp_path)
    parts = shards(walked, tmp_path)
    placed = [c.id for groups in parts.values() for cs in groups for c in cs]
    assert sorted(placed) == sorted(c.id for c, v in walked if not v.refused)  # each case that runs, once
    assert all(parts.values()), {s: len(g) for s, g in parts.items()}
    part_of = {c.id: s for s, groups in parts.items() for cs in groups for c in cs}
    group_of = {c.id: cs[0].id for groups in parts.values() for cs in groups for c in cs}
    # the compile modes that compile the same on a CPU run once (SAME_ON_CPU), the others apart
    modes = {m: group_of[f"optimize.compile_mode={m}@cpu/pretrain"] for m in
             ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")}
    assert modes["max-autotune"] == modes["max-autotune-no-cudagraphs"] != modes["reduce-overhead"]
    assert modes["reduce-overhead"] == group_of["optimize.compile=on@cpu/pretrain"]
    # the rehearsal of an FSDP a100 target runs the cpu FSDP job, label aside: one run
    assert group_of["parallel.strategy=fsdp@a100/pretrain"] == group_of["parallel.strategy=fsdp@cpu/pretrain"]
    assert part_of["parallel.strategy=fsdp@cpu/pretrain"].startswith("cpu_launched_")
    assert part_of["optimize.compile=on@cpu/pretrain"] == "cpu_compiled"
    assert part_of["workload.seed=3@cpu/pretrain"] == "cpu_one_process"
    # an FP8 target's rehearsal runs the FP8 loop: rehearsed as itself
    assert part_of["fp8.library=torchao@h100/pretrain"] == "rehearsals"
    # _as_run_here's premise: the worker reads the label in these places only (the FP8 loop's
    # choice, the random weights, the label it reports); a new reading must be weighed there
    readers = {p.relative_to(ROOT).as_posix() for p in (ROOT / "accelctl" / "worker").rglob("*.py")
               if "rehearsal_of" in p.read_text(encoding="utf-8")}
    assert readers == {"accelctl/worker/main.py", "accelctl/worker/models.py", "accelctl/worker/context.py",
                       "accelctl/worker/fp8_rehearsal.py"}, readers


@pytest.mark.slow
@pytest.mark.parametrize("shard", SHARDS)
def test_every_workload_the_walk_plans_runs_without_failing(tmp_path, shard):
    """One real run per distinct plan (``shards``): every case that runs is covered by the run
    of a case whose runner and worker get exactly its plan (a rehearsal: its job, label aside)."""
    if shard == "cpu_compiled":  # the modes run once for two compile the same on a CPU (SAME_ON_CPU)
        from torch._inductor import list_mode_options

        for mode, same in SAME_ON_CPU.items():
            cuda_only = {"triton.cudagraphs"}
            assert {k: v for k, v in list_mode_options(mode).items() if k not in cuda_only} == \
                {k: v for k, v in list_mode_options(same).items() if k not in cuda_only}, (mode, same)
    walked = _walk(tmp_path)
    groups = shards(walked, tmp_path)[shard]
    rehearse = shard == "rehearsals"
    chosen = [cs[0] for cs in groups]
    same = {cs[0].id: [c.id for c in cs] for cs in groups}
    wl = _one_file(chosen, tmp_path / "walk.wl")
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "accelctl.cli", "run", str(wl), "--headless", "--runs-dir", str(runs)]
    # run from the walk's folder (its mlflow store, checkpoints), with this checkout's accelctl
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cp = subprocess.run(argv + (["--rehearse"] if rehearse else []), capture_output=True, text=True,
                        timeout=3000, cwd=tmp_path, env=env)
    statuses = {}
    for run_dir in runs.iterdir():
        if (run_dir / "summary.json").exists():
            s = json.loads((run_dir / "summary.json").read_text())
            statuses[s["workload"]] = (s["status"], (s.get("failure") or {}).get("message", ""))
    names = {c.text.split()[1]: c for c in chosen}
    failed = {names[w].id: (why, same[names[w].id]) for w, (st, why) in statuses.items() if st != "ok"}
    assert not failed, failed
    assert set(statuses) == set(names), (sorted(set(names) - set(statuses)), cp.stderr[-3000:])
    assert cp.returncode == 0, cp.stderr[-3000:]

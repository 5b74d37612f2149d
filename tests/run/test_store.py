"""The run store: ids, inputs, generated files, listing and loading runs."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import GeneratedFile
from accelctl.run import store

ID = re.compile(r"^\d{8}-\d{6}-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[0-9a-f]{4}$")


def test_root_from_env_or_cwd(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELCTL_RUNS_DIR", str(tmp_path / "r"))
    assert store.runs_root() == tmp_path / "r"
    monkeypatch.delenv("ACCELCTL_RUNS_DIR")
    monkeypatch.chdir(tmp_path)
    assert store.runs_root() == tmp_path / "runs"
    assert store.runs_root(tmp_path / "x") == tmp_path / "x"


def test_new_run_dir_ids_are_safe_sortable_and_unique(runs):
    dirs = [store.new_run_dir("bert pretrain/../x", "gaudi2:8", runs) for _ in range(50)]
    assert len({d.name for d in dirs}) == 50
    for d in dirs:
        assert d.is_dir() and d.parent == runs
        assert ID.match(d.name), d.name
        assert "/" not in d.name and ".." not in d.name
    assert "-bert_pretrain_x-gaudi2_8-" in dirs[0].name
    assert store.safe_name("...") == "x"


def test_run_id_uses_utc_timestamp():
    assert store.new_run_id("w", "t", now=0).startswith("19700101-000000-w-t-")


def test_generated_files_substitute_run_dir_and_set_executable(runs):
    run_dir = store.new_run_dir("w", "t", runs)
    files = [
        GeneratedFile(path="hostfile", content="localhost slots=1\n"),
        GeneratedFile(path="{run_dir}/sub/launch.sh", content="#!/bin/sh\ncd {run_dir}\n", executable=True),
    ]
    written = store.write_generated_files(run_dir, files)
    assert [p.name for p in written] == ["hostfile", "launch.sh"]
    script = run_dir / "sub" / "launch.sh"
    assert script.read_text() == f"#!/bin/sh\ncd {run_dir}\n"
    assert script.stat().st_mode & stat.S_IXUSR
    assert not (run_dir / "hostfile").stat().st_mode & stat.S_IXUSR


@pytest.mark.parametrize("bad", ["../evil", "/etc/evil", "{run_dir}/../evil", "a/../../evil", "", ".", "{run_dir}/"])
def test_paths_escaping_the_run_dir_are_refused_and_nothing_is_written(runs, bad):
    run_dir = store.new_run_dir("w", "t", runs)
    files = [GeneratedFile(path="ok.txt", content="x"), GeneratedFile(path=bad, content="x")]
    with pytest.raises(store.RunStoreError):
        store.write_generated_files(run_dir, files)
    assert list(run_dir.iterdir()) == []
    assert not (runs / "evil").exists()


def test_symlink_escape_is_refused(runs, tmp_path):
    run_dir = store.new_run_dir("w", "t", runs)
    (run_dir / "link").symlink_to(tmp_path)
    with pytest.raises(store.RunStoreError):
        store.write_generated_files(run_dir, [GeneratedFile(path="link/evil", content="x")])


def test_write_inputs(runs, make_plan):
    plan = make_plan(options={"data_dir": "{run_dir}/data"}, files=[GeneratedFile(path="ds_config.json", content='{"d": "{run_dir}"}')])
    run_dir = store.new_run_dir(plan.workload, plan.target, runs)
    job = store.write_inputs(run_dir, plan, source_text="workload tiny {}\n", spec_json={"name": "tiny"})
    assert (run_dir / "workload.wl").read_text() == "workload tiny {}\n"
    assert json.loads((run_dir / "spec.json").read_text()) == {"name": "tiny"}
    assert json.loads((run_dir / "plan.json").read_text()) == json.loads(plan.to_json())  # as printed
    assert json.loads((run_dir / "ds_config.json").read_text()) == {"d": str(run_dir)}
    on_disk = WorkerJob.load(run_dir / "job.json")
    assert on_disk == job
    assert job.run_id == run_dir.name
    assert job.events_dir == str(run_dir)
    # the job is data, never a template: its strings arrive as written (issue 22 #7)
    assert job.debug.fake["data_dir"] == "{run_dir}/data"


def _fake_run(root, name, summary=None):
    d = root / name
    d.mkdir(parents=True)
    if summary is not None:
        (d / "summary.json").write_text(json.dumps(summary))
    return d


SUMMARY = {
    "status": "ok",
    "workload": "bert",
    "target": "cpu",
    "backend": "cpu",
    "started": "2026-11-22T02:30:00Z",
    "started_unix_s": 1.0,
    "stats": {
        "step_time": {"median": 0.012},
        "throughput": {"samples_per_s": {"median": 330.0, "mean": 320.0}, "tokens_per_s": None},
        "generation": None,
    },
}


def test_list_runs_newest_first_and_tolerant(runs):
    _fake_run(runs, "20261122-023000-bert-cpu-aaaa", SUMMARY)
    gen = dict(SUMMARY, stats={"step_time": {"median": 0.5}, "throughput": {}, "generation": {"tokens_per_s_median": 42.0}})
    _fake_run(runs, "20261122-040000-bloom-cpu-bbbb", gen)
    d = _fake_run(runs, "20261123-000000-t5-a100-cccc")  # no summary: still running or killed
    (d / "plan.json").write_text(json.dumps({"workload": "t5", "target": "a100", "backend": "torchrun"}))
    _fake_run(runs, "20261121-000000-broken-cpu-dddd").joinpath("summary.json").write_text("{not json")
    _fake_run(runs, "not-a-run")
    (runs / "stray.txt").write_text("")

    recs = store.list_runs(runs)
    assert [r.id[-4:] for r in recs] == ["cccc", "bbbb", "aaaa", "dddd"]
    incomplete, bloom, bert, broken = recs
    assert (incomplete.status, incomplete.workload, incomplete.backend) == ("incomplete", "t5", "torchrun")
    assert incomplete.started == "2026-11-23T00:00:00Z"
    assert incomplete.median_step_time_s is None and incomplete.throughput is None
    assert (bert.status, bert.median_step_time_s, bert.throughput, bert.throughput_unit) == ("ok", 0.012, 330.0, "samples/s")
    assert (bloom.throughput, bloom.throughput_unit) == (42.0, "tokens/s")
    # a summary that is not JSON is a broken run with its reason, not a run still going
    assert broken.status.startswith("unreadable: summary.json is not JSON"), broken.status
    assert store.list_runs(runs / "nowhere") == []


def test_load_run_by_id_prefix_suffix_and_path(runs):
    d = _fake_run(runs, "20261122-023000-bert-cpu-aaaa", SUMMARY)
    _fake_run(runs, "20261122-023000-bert-cpu-bbbb", SUMMARY)
    assert store.load_run(d.name, runs).path == d
    assert store.load_run(str(d)).id == d.name
    assert store.load_run("aaaa", runs).id == d.name
    with pytest.raises(store.RunStoreError, match="ambiguous"):
        store.load_run("20261122-023000", runs)
    with pytest.raises(store.RunStoreError, match="no run"):
        store.load_run("zzzz", runs)


def test_summary_is_written_atomically(runs):
    d = store.new_run_dir("w", "t", runs)
    store.write_summary(d, {"status": "ok"})
    assert json.loads((d / "summary.json").read_text()) == {"status": "ok"}
    assert not any(p.name.endswith(".tmp") for p in d.iterdir())
    assert os.listdir(d) == ["summary.json"]

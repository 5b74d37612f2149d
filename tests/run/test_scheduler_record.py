"""The scheduler's job in the run store: ``scheduler.json`` -> summary.json -> ``accelctl runs``."""

from __future__ import annotations

import json

from accelctl.cli import main
from accelctl.contract import scheduler
from accelctl.run import store


def _finished_run(root, status="ok"):
    run_dir = store.new_run_dir("wl", "t", root)
    (run_dir / store.PLAN_FILE).write_text(json.dumps({"workload": "wl", "target": "t", "backend": "deepspeed",
                                                       "engine": "slurm"}))
    return run_dir


def test_the_record_round_trips_and_refuses_what_is_not_one(tmp_path):
    job = scheduler.SchedulerJob("slurm", "42", "TIMEOUT", 1)
    scheduler.write(tmp_path, job)
    assert scheduler.read(tmp_path) == job and job.short() == "slurm 42 TIMEOUT exit 1"
    assert scheduler.SchedulerJob("slurm", "7", "COMPLETED", 0).short() == "slurm 7 COMPLETED"
    (tmp_path / scheduler.FILE).write_text("[1, 2]")
    assert scheduler.read(tmp_path) is None
    assert scheduler.from_dict({"scheduler": "slurm"}) is None  # no job id
    assert scheduler.read(tmp_path / "nowhere") is None


def test_the_summary_carries_the_jobs_final_state_and_runs_shows_it(tmp_path, capsys, monkeypatch):
    root = tmp_path / "runs"
    run_dir = _finished_run(root)
    scheduler.write(run_dir, scheduler.SchedulerJob("slurm", "1234", "RUNNING"))
    # while it runs (no summary yet) the listing shows the last state the submitter saw
    rec = store.read_run(run_dir)
    assert rec.status == "incomplete" and rec.engine == "slurm" and rec.scheduler.state == "RUNNING"
    scheduler.write(run_dir, scheduler.SchedulerJob("slurm", "1234", "CANCELLED", 143))
    store.write_summary(run_dir, {"run_id": run_dir.name, "status": "stopped", "workload": "wl", "target": "t",
                                  "backend": "deepspeed", "engine": "slurm"})
    summary = json.loads((run_dir / store.SUMMARY_FILE).read_text())
    assert summary["scheduler"] == {"scheduler": "slurm", "job_id": "1234", "state": "CANCELLED", "exit_code": 143}
    rec = store.load_run(run_dir.name, root)
    assert rec.scheduler == scheduler.SchedulerJob("slurm", "1234", "CANCELLED", 143) and rec.engine == "slurm"
    # a local run's summary has no scheduler key at all
    local = store.new_run_dir("wl", "local", root)
    store.write_summary(local, {"run_id": local.name, "status": "ok"})
    assert "scheduler" not in json.loads((local / store.SUMMARY_FILE).read_text())
    assert store.read_run(local).scheduler is None

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", "--runs-dir", str(root)]) == 0
    out = capsys.readouterr().out
    # the scheduler's job is the second line of the run's status cell (it may wrap at 80)
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"│ {run_dir.name[-4:]} "))
    status = []
    for line in lines[first:]:
        cells = line.split("│")[1:-1]
        if not cells or (status and cells[0].strip()):
            break
        status.append(cells[3].strip())
    assert " ".join(status) == "stopped slurm 1234 CANCELLED exit 143", out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert main(["runs", "--runs-dir", str(root), "--json"]) == 0
    listed = {r["id"]: r for r in json.loads(capsys.readouterr().out)["result"]["runs"]}
    assert listed[run_dir.name]["scheduler"]["state"] == "CANCELLED" and listed[local.name]["scheduler"] is None

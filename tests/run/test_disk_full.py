"""A full disk is named wherever it lands (issue 22, item 6), on real full file systems: a
tmpfs of a few MiB mounted for the test (root; skipped, saying why, where the kernel refuses).

* a checkpoint save that meets ENOSPC: the run ``failed``, reason ``disk_full``, "no space left
  on device while saving checkpoint at step N to <folder>"; the cut save removed, the earlier
  checkpoint intact, and ``accelctl run --resume`` goes on from it once there is room;
* ``disk_full`` on the errors torch really raises: ``torch.save`` to a path (its C++ writer,
  as DeepSpeed saves: "unexpected pos", no errno) and to a file object;
* runs sharing one worker process: a job list the store cannot take fails that run
  ``store_error`` (as a run of its own fails on a full store), never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_checkpoint_resume import CPU_WORKLOAD, DDP_WORKLOAD

from accelctl.contract import checkpoint as layout

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size)``: a fresh tmpfs of ``size`` (mount's syntax, e.g. "4m"), unmounted after."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        if os.geteuid() != 0 or not sys.platform.startswith("linux"):
            pytest.skip("mounting a tmpfs needs root on Linux")
        mnt = tmp_path / f"fs{len(mounted)}"
        mnt.mkdir()
        cp = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True,
                            text=True)
        if cp.returncode != 0:
            pytest.skip(f"the kernel refuses a tmpfs here: {cp.stderr.strip()}")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in mounted:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder: Path) -> Path:
    """Write into ``folder`` until its file system answers ENOSPC; the filler file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as fh:
        with pytest.raises(OSError) as full:
            while True:
                fh.write(b"\0" * 65536)
    assert full.value.errno == errno.ENOSPC
    return filler


# --------------------------------------------------------------------------- telling a full disk


def test_disk_full_recognises_the_errors_torch_raises_on_a_full_file_system(tmpfs, tmp_path):
    torch = pytest.importorskip("torch")
    from accelctl.worker.checkpoint import disk_full

    mnt = tmpfs("1m")
    big = torch.zeros(1 << 20)  # 4 MiB
    with pytest.raises(Exception) as by_path:  # the C++ writer: no errno anywhere in the chain
        torch.save(big, mnt / "by_path.pt")
    assert not any(isinstance(e, OSError) for e in (by_path.value, by_path.value.__context__))
    assert disk_full(by_path.value, mnt)
    (mnt / "by_path.pt").unlink()
    with pytest.raises(Exception) as by_handle:
        with open(mnt / "by_handle.pt", "wb") as fh:
            torch.save(big, fh)
    (mnt / "by_handle.pt").unlink()  # room again: told by the errno in the chain alone
    assert disk_full(by_handle.value, mnt)
    # an unrelated failure on a file system with room is not a full disk
    assert not disk_full(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1 vs 2"), tmp_path)


# --------------------------------------------------------------------------- a checkpoint save, end to end

WORKLOAD = CPU_WORKLOAD.replace("steps = 80 steps", "steps = 20 steps").replace("keep = 2", "keep = 1")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=ENV)


@pytest.mark.slow
def test_a_checkpoint_save_on_a_full_disk_is_named_and_the_run_resumes_from_the_one_before(tmpfs, tmp_path):
    """The run store on a 4 MiB tmpfs: step 5's checkpoint (2.3 MiB) fits, step 10's does not."""
    runs = tmpfs("4m")
    workload = tmp_path / "full.wl"
    workload.write_text(WORKLOAD)
    cp = cli("run", str(workload), "--headless", "--runs-dir", str(runs))
    out = cp.stdout + cp.stderr
    assert cp.returncode == 1, out[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    folder = run_dir / "checkpoints"
    want = f"no space left on device while saving checkpoint at step 10 to {layout.step_dir(folder, 10)}"
    assert f"disk_full (rank 0): {want}" in out
    assert "Traceback" not in out and "unexpected pos" not in out and "Errno" not in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["failure"]["reason"] == "disk_full" and summary["failure"]["step"] == 10
    # refused before a byte was written (the room it needs is measured): the run's own files keep theirs
    assert re.fullmatch(re.escape(want) + r" \(about 2\.\d MiB to write, 1\.\d MiB free\)",
                        summary["failure"]["message"]), summary["failure"]["message"]
    assert sorted(p.name for p in folder.iterdir()) == ["step-00000005"]  # the cut save removed
    assert [s for s, _ in layout.complete(folder)] == [5]

    resumes_with_room(runs, "16m", run_dir, 5, 20)


def resumes_with_room(runs: Path, size: str, run_dir: Path, step: int, last: int) -> None:
    """The tmpfs ``runs`` grown to ``size``: ``accelctl run --resume`` goes on from ``step``, to the end."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(runs)], check=True)
    cp = cli("run", "--resume", run_dir.name, "--headless", "--runs-dir", str(runs))
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    assert f"resuming run {run_dir.name} after step {step}" in cp.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and [r["step"] for r in summary["resumed"]] == [step]
    assert [s for s, _ in layout.complete(run_dir / "checkpoints")] == [last]


# --------------------------------------------------------------------------- runs sharing a worker


def gen_workload(name: str) -> str:
    return f"""
workload {name} {{
  task generate {{ prompt = "hello there" max_new_tokens = 4 tokens decoding = greedy kv_cache = on batch_size = 1 }}
  model gpt2(layers = 1, hidden = 32, heads = 2, vocab = 300, max_positions = 128)
  precision fp32
  measure {{ warmup = 1 steps  steps = 2 steps }}
  target cpu {{ threads = 1  precision = fp32 }}
}}
"""


def test_a_job_list_the_full_store_cannot_take_fails_its_run_as_store_error(tmpfs, tmp_path):
    from accelctl.api import load, plan
    from accelctl.run.supervision.shared import SharedRuns, signature

    runs = tmpfs("1m")
    wl = tmp_path / "two.wl"
    wl.write_text(gen_workload("first") + gen_workload("second"))
    plans = [plan(spec, "cpu") for spec in load(wl)]
    assert signature(plans[0]) is not None and signature(plans[0]) == signature(plans[1])
    shared = SharedRuns(plans, source_text=None, spec_jsons=[None, None], runs_root=runs)
    fill(runs)
    try:
        result = shared.start().wait(timeout=60)
    finally:
        assert shared.close() == ["second"]  # never started: its folder goes, as after a stop
    assert result.status == "failed"
    assert result.summary["failure"]["reason"] == "store_error"
    assert result.summary["failure"]["message"] == "run store: No space left on device writing jobs.json"
    assert result.returncodes == (None,)  # no worker was started on a job list that is not there
    assert not (result.run_dir / "jobs.json").exists()


# --------------------------------------------------------------------------- the runner's own lines in worker.log

FILL = """
import os, sys
with open(os.path.join(sys.argv[1], "filler"), "wb", buffering=0) as fh:
    try:
        while True:
            fh.write(bytes(65536))
    except OSError:
        pass
try:  # worker.log (this launch's stdout) to the end of its last block too
    while True:
        os.write(1, b"x")
except OSError:
    pass
"""


def test_a_worker_log_the_full_store_cannot_take_fails_the_run_before_the_next_launch(tmpfs, make_plan):
    """A launch marked ``wait`` fills the file system (worker.log to its last byte too): the
    runner's line before the next launch meets ENOSPC; the run ends store_error naming
    worker.log, and the next launch never starts."""
    from accelctl.contract.plan import Launch
    from accelctl.run.supervision import runner

    runs = tmpfs("1m")
    fill = Launch(name="fill", argv=(sys.executable, "-c", FILL, "{run_dir}"), wait=True)
    worker = Launch(name="worker", argv=(sys.executable, "-c", "import time; time.sleep(60)"))
    handle = runner.launch(make_plan(launches=(fill, worker)), source_text=None, spec_json=None, runs_root=runs)
    result = handle.wait(timeout=60)
    assert result.status == "failed"
    assert result.summary["failure"]["reason"] == "store_error"
    assert result.summary["failure"]["message"] == "run store: No space left on device writing worker.log"
    assert result.returncodes == (0, None)


# --------------------------------------------------------------------------- a rank that cannot say so

SILENCED = """
import os, sys, time
from pathlib import Path
from accelctl.contract.events import LogMessage, PhaseChanged
run_dir = Path(sys.argv[1])
with open(run_dir / "rank0.jsonl", "a") as out:
    out.write(PhaseChanged(phase="setup").to_json() + "\\n")
    out.flush()
    while b"setup" not in (run_dir / "events.jsonl").read_bytes():  # the runner has it
        time.sleep(0.01)
    with open(run_dir / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(bytes(65536))
        except OSError:
            pass
    try:  # an event larger than what is left of its file's last block: it cannot be written
        out.write(LogMessage(level="info", message="x" * 8192).to_json() + "\\n")
        out.flush()
    except OSError:
        sys.exit(1)  # as the worker does when its events cannot be written (it says nothing more)
"""


def test_a_rank_that_meets_the_full_store_before_it_can_report_fails_the_run_store_error(tmpfs, make_plan):
    from accelctl.contract.plan import Launch
    from accelctl.run.supervision import runner

    runs = tmpfs("1m")
    rank = Launch(name="worker", argv=(sys.executable, "-c", SILENCED, "{run_dir}"))
    result = runner.launch(make_plan(launches=(rank,)), source_text=None, spec_json=None, runs_root=runs).wait(60)
    assert result.returncodes == (1,)
    assert result.status == "failed"
    assert result.summary["failure"]["reason"] == "store_error"
    assert result.summary["failure"]["message"] == "run store: No space left on device writing the ranks' events"


@pytest.mark.slow
def test_a_ddp_checkpoint_save_on_a_full_disk_is_the_failure_over_its_peer_s_and_leaves_no_cut_save(tmpfs, tmp_path):
    """torchrun, 2 ranks over gloo, the run store on a 4 MiB tmpfs: step 4's checkpoint (2.4 MiB)
    fits, step 8's does not.  Rank 1, left at the barrier, fails too (gloo: connection reset):
    rank 0's disk_full is the run's failure, and no rank leaves its part of the cut save."""
    runs = tmpfs("4m")
    workload = tmp_path / "ddp.wl"
    workload.write_text(DDP_WORKLOAD.replace("steps = 30 steps", "steps = 12 steps"))
    cp = cli("run", str(workload), "--headless", "--runs-dir", str(runs))
    assert cp.returncode == 1, (cp.stdout + cp.stderr)[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    failure = json.loads((run_dir / "summary.json").read_text())["failure"]
    assert failure["reason"] == "disk_full" and failure["rank"] == 0 and failure["step"] == 8
    assert failure["message"].startswith("no space left on device while saving checkpoint at step 8 to ")
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-00000004"]
    assert [s for s, _ in layout.complete(run_dir / "checkpoints")] == [4]


@pytest.mark.slow
def test_a_sharded_checkpoint_save_on_a_full_disk_is_named_and_the_run_resumes_from_the_one_before(tmpfs, tmp_path):
    """FSDP2 on 2 gloo ranks, the run store on a 13 MiB tmpfs: step 4's DCP checkpoint (7.1 MiB:
    a llama of 624k parameters and AdamW's moments) fits, step 8's does not -- yet each rank's
    shard (3.6 MiB) and a MiB to spare fit what is free (~5.5 MiB), so the save starts and a
    rank's write meets ENOSPC.  DCP tells every rank (a CheckpointException, which is no
    Exception); the run fails disk_full, leaves no cut save and resumes from step 4."""
    from test_sharded_resume import LLAMA, STEPS, workload_text

    runs = tmpfs("13m")
    workload = tmp_path / "fsdp.wl"
    workload.write_text(workload_text("fsdp").replace(f"steps = {STEPS} steps", "steps = 11 steps")
                        .replace("keep = 2", "keep = 1")
                        .replace(LLAMA, "llama(layers = 4, hidden = 128, heads = 4, ffn = 192, vocab = 256)"))
    cp = cli("run", str(workload), "--headless", "--runs-dir", str(runs))
    out = cp.stdout + cp.stderr
    assert cp.returncode == 1, out[-3000:]
    assert "Traceback" not in out and "CheckpointException" not in out, out[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    failure = json.loads((run_dir / "summary.json").read_text())["failure"]
    assert failure["reason"] == "disk_full" and failure["step"] == 8, failure
    assert failure["message"].startswith("no space left on device while saving checkpoint at step 8 to ")
    assert "MiB free" not in failure["message"]  # not refused before writing: DCP's own write met the full disk
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-00000004"]  # no cut save left
    assert [s for s, _ in layout.complete(run_dir / "checkpoints")] == [4]
    resumes_with_room(runs, "32m", run_dir, 4, 12)

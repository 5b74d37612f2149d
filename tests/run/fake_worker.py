"""A stand-in for ``python -m accelctl.worker JOB``: a real process that reads the job,
appends events to ``$ACCELCTL_EVENTS_DIR/rank<N>.jsonl`` and exits like the worker does
(0 ok, 3 NaN loss, 1 exception, 130 stopped).  ``job.debug.fake["fake"]`` picks the script:

ok         warm-up + measured steps, loss going down, RunFinished
crash      two steps, a message on stderr, then dies (exit 7) without a RunFailed
nan        NaN loss on the second measured step: RunFailed(nan_loss), exit 3
exception  RunFailed(exception), exit 1
hang       steps slowly forever with a child process; SIGINT → RunFailed(stopped), exit 130
stubborn   like hang but ignores SIGINT and SIGTERM (needs SIGKILL)
linger     reports RunFailed(nan_loss), then hangs instead of exiting

``job.debug.fake["crash_rank"]``: that rank (env RANK) crashes and the others hang.
Extra argv ``--touch PATH`` writes PATH (checks {run_dir} substitution), ``--require
PATH`` exits 5 unless PATH exists (checks launch order); env
``FAKE_ENV_OUT`` names a file to write the value of ``FAKE_ENV_VALUE`` into.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

job = json.loads(Path(sys.argv[1]).read_text())
opts = job["debug"]["fake"]
mode = opts.get("fake", "ok")
rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
if "crash_rank" in opts:
    mode = "crash" if rank == opts["crash_rank"] else "hang"
    if mode == "crash":  # let rank 0 reach its loop first, so it can answer SIGINT
        rank0 = Path(os.environ["ACCELCTL_EVENTS_DIR"], "rank0.jsonl")
        deadline = time.time() + 20
        while time.time() < deadline and not (rank0.exists() and '"kind": "step"' in rank0.read_text()):
            time.sleep(0.01)
events_dir = os.environ["ACCELCTL_EVENTS_DIR"]
assert events_dir == job["events_dir"], (events_dir, job["events_dir"])
out = open(Path(events_dir) / f"rank{rank}.jsonl", "a", encoding="utf-8")
torn = bool(opts.get("torn"))

if "--require" in sys.argv and not Path(sys.argv[sys.argv.index("--require") + 1]).exists():
    print("required file missing: an earlier launch did not finish first", file=sys.stderr)
    sys.exit(5)
if "--touch" in sys.argv:
    Path(sys.argv[sys.argv.index("--touch") + 1]).write_text("touched")
if os.environ.get("FAKE_ENV_OUT"):
    Path(os.environ["FAKE_ENV_OUT"]).write_text(os.environ.get("FAKE_ENV_VALUE", ""))


def emit(kind, **fields):
    line = json.dumps({"kind": kind, "rank": rank, "time_unix_s": time.time(), **fields})
    if torn:  # the runner must wait for the rest of a half-written line
        out.write(line[: len(line) // 2])
        out.flush()
        time.sleep(0.01)
        out.write(line[len(line) // 2 :])
    else:
        out.write(line)
    out.write("\n")
    out.flush()


def step(i, phase, repeat=0, loss=None, t=0.01):
    time.sleep(float(opts.get("step_sleep", 0.0)))
    emit("step", step=i, phase=phase, repeat=repeat, step_time_s=t, loss=loss,
         samples=4, tokens=64, samples_per_s=4 / t, tokens_per_s=64 / t, mem_bytes=1 << 20)


emit("run_started", run_id=job["run_id"], workload=job["workload"], target=job["target"],
     backend=job["backend"], world_size=world,
     env={"python": "3.11", "torch": "0.0-fake", "cpu_model": "Fake CPU", "threads": 1},
     details={"model": "fake"})
emit("phase", phase="setup")
print(f"fake worker rank {rank} mode {mode}", flush=True)

if mode == "linger":
    emit("run_failed", reason="nan_loss", message="loss is nan", step=0)
    try:
        while True:
            time.sleep(0.05)
    except KeyboardInterrupt:
        sys.exit(130)

if mode in ("hang", "stubborn"):
    if mode == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # a child in the same process group: it must go when the group is stopped
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    Path(events_dir, f"child{rank}.pid").write_text(str(child.pid))
    emit("phase", phase="warmup")
    try:
        i = 0
        while True:
            step(i, "warmup", t=0.02)
            i += 1
            time.sleep(0.02)
    except KeyboardInterrupt:
        child.wait()
        emit("run_failed", reason="stopped", message="interrupted", step=i)
        sys.exit(130)

m = job["measure"]
emit("phase", phase="warmup")
for i in range(m["warmup"]):
    step(i, "warmup", loss=5.0, t=0.05)
n = 0
for r in range(m["repeat"]):
    emit("phase", phase="measure", repeat=r)
    for i in range(m["steps"]):
        loss = 4.0 - 0.1 * n
        if mode == "nan" and n == 1:
            loss = math.nan
        step(i, "measure", repeat=r, loss=loss, t=0.01 * (1 + i % 2))
        n += 1
        if mode == "nan" and n == 2:
            emit("run_failed", reason="nan_loss", message=f"loss is nan at step {i}", step=i)
            sys.exit(3)
        if mode == "crash" and n == 2:
            print("boom: simulated segfault in the fake worker", file=sys.stderr, flush=True)
            os._exit(7)
        if mode == "exception" and n == 2:
            emit("run_failed", reason="exception", message="ValueError: fake", traceback="Traceback...")
            sys.exit(1)
    emit("log", level="warning", message=f"fake warning in repeat {r}")
emit("phase", phase="done")
emit("run_finished", steps=n, wall_s=0.5, results={"final_loss": 4.0 - 0.1 * (n - 1)})
sys.exit(0)

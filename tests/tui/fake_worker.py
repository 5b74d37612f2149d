"""A stand-in worker for live TUI tests: replays a recorded ``events.jsonl`` as if it were
running now.  ``python fake_worker.py JOB``; ``job.debug.fake``:

replay     path of the recorded events.jsonl (required)
delay_s    seconds between two step events (default 0.02)
fail_at    after this many step events: RunFailed(exception), exit 1
setup_s    seconds of silence before the first event (a real worker's imports and model build)
Every event is written to ``$ACCELCTL_EVENTS_DIR/rank<its rank>.jsonl`` with this run's
id and the current time; SIGINT -> RunFailed(stopped), exit 130 (like the real worker).
"""

import json
import os
import sys
import time
from pathlib import Path

job = json.loads(Path(sys.argv[1]).read_text())
opts = job["debug"]["fake"]
events_dir = Path(os.environ["ACCELCTL_EVENTS_DIR"])
outs = {}


def emit(ev):
    rank = ev.get("rank", 0)
    if rank not in outs:
        outs[rank] = open(events_dir / f"rank{rank}.jsonl", "a", encoding="utf-8")
    ev = {**ev, "time_unix_s": time.time()}
    if ev["kind"] == "run_started":
        ev["run_id"] = job["run_id"]
    outs[rank].write(json.dumps(ev) + "\n")
    outs[rank].flush()


print(f"fake worker replaying {Path(opts['replay']).parent.name}", flush=True)
steps = 0
try:
    time.sleep(float(opts.get("setup_s", 0.0)))
    for line in Path(opts["replay"]).read_text().splitlines():
        ev = json.loads(line)
        if ev["kind"] == "step":
            time.sleep(float(opts.get("delay_s", 0.02)))
            steps += 1
            if steps == opts.get("fail_at"):
                emit({"kind": "run_failed", "reason": "exception", "message": "ValueError: fake failure", "rank": 0})
                print("Traceback (most recent call last):\nValueError: fake failure", flush=True)
                sys.exit(1)
        emit(ev)
except KeyboardInterrupt:
    emit({"kind": "run_failed", "reason": "stopped", "message": "interrupted", "rank": 0, "step": steps})
    sys.exit(130)
sys.exit(0)

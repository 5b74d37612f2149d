"""``python tests/worker/signal_at.py WHEN JOB.json``: the real worker (``accelctl.worker.main``),
which sends itself a stop signal at one exact moment of how its job ends -- the moments a
launcher's or the runner's stop can land on by chance (torchrun SIGTERMs rank 0 as it handles
the NaN its peer already died of; the runner's SIGTERM ``grace_s`` after its SIGINT):

* ``failure-record``: SIGTERM as the job's failure event (``RunFailed``) is being written;
* ``traceback``: SIGTERM while a crash's traceback is being formatted for its event;
* ``finished-record``: SIGTERM as ``RunFinished`` is being written;
* ``stop-record``: SIGINT at step 2 (a stop), then SIGTERM as that stop's event is being written.

The signal is real (``signal.raise_signal``: delivered to the worker's main thread at once, its
Python handler run there and then); only the moment is chosen.  Everything else is the worker
as a launch runs it: a real job, a real loop, real events.
"""

from __future__ import annotations

import signal
import sys
import traceback

from accelctl.contract.events import RunFailed, RunFinished, StepMetrics
from accelctl.worker import emit
from accelctl.worker.main import exit_now, main

when, job = sys.argv[1:]
fired: list[str] = []


def fire(name: str, sig: signal.Signals) -> None:
    if name not in fired:
        fired.append(name)
        print(f"signal_at: {sig.name} at {name}", file=sys.stderr, flush=True)
        signal.raise_signal(sig)


real_emit = emit.EventWriter.emit


def emit_then(self, event):
    if when == "failure-record" and isinstance(event, RunFailed):
        fire(when, signal.SIGTERM)
    elif when == "finished-record" and isinstance(event, RunFinished):
        fire(when, signal.SIGTERM)
    elif when == "stop-record" and isinstance(event, StepMetrics) and event.step == 2:
        fire("step 2", signal.SIGINT)
    elif when == "stop-record" and isinstance(event, RunFailed):
        fire(when, signal.SIGTERM)
    return real_emit(self, event)


emit.EventWriter.emit = emit.EventWriter.__call__ = emit_then
if when == "traceback":
    for name in ("format_exc", "format_exception"):
        real = getattr(traceback, name)
        setattr(traceback, name, lambda *a, _real=real, **k: (fire(when, signal.SIGTERM), _real(*a, **k))[1])
exit_now(main([job]))

"""Facts about runs every layer reads, stated once (the run-id pattern, the worker's exit
codes), so the store, completion, the worker and the runner cannot disagree.  Imports nothing: completion reads it before anything else is loaded."""

from __future__ import annotations

import re

#: a run folder's name: ``YYYYMMDD-HHMMSS-<workload>-<target>-<4 hex>`` (``accelctl.run.store``)
RUN_ID = re.compile(r"^(\d{8}-\d{6})-(.+)-([0-9a-f]{4})$")

#: the worker's exit codes (``python -m accelctl.worker``), and the runner's reading of them
WORKER_OK, WORKER_EXCEPTION, WORKER_NAN, WORKER_STOPPED = 0, 1, 3, 130
#: the worker's exit code for a job that ended with this ``RunFailed.reason``
JOB_EXIT_CODES = {"stopped": WORKER_STOPPED, "runner_lost": WORKER_STOPPED, "nan_loss": WORKER_NAN}

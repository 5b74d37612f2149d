"""The live tracking sink: the runner's events to experiment trackers, off the run's path.

``TrackingSink.on_event`` runs on the supervisor thread and only does dictionary work: it folds
each rank's ``StepMetrics`` into the step's straggler time and, once every rank reported a step,
queues rank 0's figures.  A daemon thread hands the queue in batches to each backend, so nothing a
tracker does runs on the supervisor thread or in the workers.  A backend that raises is reported
once (a ``summary.json`` warning) and not called again; a full queue (``QUEUE_MAX``) drops steps
with one warning; ``finish`` waits at most ``finish_timeout_s``.  Tracking never changes a run's
status: the run folder is the record, and ``accelctl report`` can log it again.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from pathlib import Path
from typing import Any

from accelctl.analysis.scalars import TrackerSteps, step_scalars
from accelctl.analysis.stats import fold_step_time, step_key
from accelctl.contract.events import RunStarted, StepMetrics
from accelctl.run.store import SPEC_FILE, read_json
from accelctl.run.tracking import fields
from accelctl.run.tracking.backends import RunInfo

log = logging.getLogger("accelctl.run")

QUEUE_MAX = 10_000
#: how a stored run reaches each tracker after the fact
LOG_LATER = {"mlflow": "accelctl report --mlflow URI", "wandb": "accelctl report --wandb PROJECT",
             "tensorboard": "accelctl report --tensorboard DIR"}
#: items handed to the backends in one call at most
BATCH_MAX = 500
#: how long the end of a run waits for the trackers (``ACCELCTL_TRACK_TIMEOUT_S``)
FINISH_TIMEOUT_S = float(os.environ.get("ACCELCTL_TRACK_TIMEOUT_S", "60"))


class TrackingSink:
    def __init__(self, info: RunInfo, backends: list[Any], *, world_size: int = 1, measure: dict | None = None,
                 plan_fields: dict[str, Any] | None = None, finish_timeout_s: float = FINISH_TIMEOUT_S,
                 local_ranks: int | None = None):
        self.info = info
        self.backends = list(backends)
        self.finish_timeout_s = finish_timeout_s
        #: one line per tracker that failed (and for a full queue, a late finish)
        self.warnings: list[str] = []
        self._world = max(1, local_ranks or world_size)
        #: the ranks that report to this runner when it starts only some launches (one runner per
        #: node): a step is released once they have reported it, not the whole world
        self._local = local_ranks
        self._measure = measure or {}
        self._plan = plan_fields or {}
        self._times: dict[Any, float] = {}
        self._ranks: dict[Any, set[int]] = {}
        self._pending: dict[Any, StepMetrics] = {}  # rank-0 steps waiting for the other ranks, in order
        self._numbers = TrackerSteps()  # the step number trackers log (a repeat's rounds go on counting)
        self._queue: queue.Queue = queue.Queue(QUEUE_MAX)
        self._dropped = 0
        self._broken: set[str] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name=f"accelctl-track-{info.run_id}", daemon=True)
        self._thread.start()

    # -- the supervisor thread -------------------------------------------------------

    def on_event(self, event: Any) -> None:
        if isinstance(event, StepMetrics):
            self._fold(event)
        elif isinstance(event, RunStarted) and event.rank == 0:
            if self._local is None:
                self._world = max(self._world, event.world_size)
            spec = read_json(self.info.run_dir / SPEC_FILE)  # the optimizer, seed, layout asked for
            self._put(("params", fields.run_params(run_id=self.info.run_id, world_size=event.world_size,
                                                   details=event.details, measure=self._measure, spec=spec,
                                                   **self._plan)))

    def _fold(self, step: StepMetrics) -> None:
        key = step_key(step)
        fold_step_time(self._times, step)
        self._ranks.setdefault(key, set()).add(step.rank)
        if step.rank == 0:
            self._pending[key] = step
        self._release(final=False)

    def _release(self, final: bool) -> None:
        """Queue the rank-0 steps every rank has reported (all of them at the end), in order."""
        rows = []
        for key in list(self._pending):
            if not final and len(self._ranks.get(key, ())) < self._world:
                break
            step = self._pending.pop(key)
            rows.append((self._numbers(step), float(step.time_unix_s), step_scalars(step, self._times[key], self.info.prefix)))
            self._ranks.pop(key, None)
        if rows:
            self._put(("steps", rows))

    def _put(self, item: tuple) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._dropped += 1
            if self._dropped == 1:
                self._warn(f"tracking: the trackers fell {QUEUE_MAX} items behind; later steps are not logged "
                           "live (accelctl report --mlflow/--wandb logs the stored run)")

    # -- the end ---------------------------------------------------------------------

    def finish(self, summary: dict[str, Any], run_dir: Path) -> None:
        """Log the end of the run (headline figures, artifacts, status) and close the trackers,
        waiting ``finish_timeout_s`` at most."""
        self._release(final=True)
        try:
            self._queue.put(("finish", summary, run_dir), timeout=self.finish_timeout_s)
        except queue.Full:
            pass
        self._thread.join(self.finish_timeout_s)
        if self._thread.is_alive():
            self._warn(f"tracking: the trackers did not finish within {self.finish_timeout_s:g} s; the run's folder "
                       "has everything (accelctl report --mlflow/--wandb logs it again)")

    def abandon(self) -> None:
        """The run never started: end the trackers' runs as failed, without waiting."""
        try:
            self._queue.put_nowait(("finish", {"status": "failed"}, self.info.run_dir))
        except queue.Full:
            pass

    def where(self) -> dict[str, dict[str, str]]:
        """Where each tracker that has not failed logs the run (``summary.json``'s ``tracking``)."""
        out = {}
        for b in self.backends:
            if b.name not in self._broken:
                try:
                    out[b.name] = b.where()
                except Exception:  # noqa: BLE001 - a description must not fail the summary
                    out[b.name] = {}
        return out

    def annotate(self, summary: dict[str, Any]) -> dict[str, Any]:
        """``summary`` with the trackers (``tracking``) and their warnings added."""
        with self._lock:
            before = list(summary.get("warnings", []))
            warnings = [*before, *(w for w in self.warnings if w not in before)]
        return {**summary, "warnings": warnings, "tracking": self.where()}

    # -- the tracking thread ---------------------------------------------------------

    def _warn(self, message: str) -> None:
        with self._lock:
            if message not in self.warnings:
                self.warnings.append(message)
        log.warning("%s", message)

    def _call(self, backend: Any, method: str, *args: Any) -> None:
        if backend.name in self._broken:
            return
        try:
            getattr(backend, method)(*args)
        except Exception as exc:  # noqa: BLE001 - tracking never stops the run
            self._broken.add(backend.name)
            text = " ".join(str(exc).split())[:300] or type(exc).__name__
            self._warn(f"tracking: {backend.name} failed ({method}: {type(exc).__name__}: {text}); the run goes on "
                       f"without it, its folder is the record ({LOG_LATER[backend.name]} logs it later)")

    def _work(self) -> None:
        for b in self.backends:
            self._call(b, "start", self.info)
        try:
            while True:
                batch = [self._queue.get()]
                while len(batch) < BATCH_MAX:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if self._handle(batch):
                    return
        finally:
            for b in self.backends:
                try:
                    b.close()
                except BaseException:  # noqa: BLE001 - wandb.teardown raises SystemExit for a service that
                    # ended badly: every tracker is still closed, and this thread ends as it should
                    log.debug("closing tracker %s", b.name, exc_info=True)

    def _handle(self, batch: list[tuple]) -> bool:
        """Hand a batch to the backends; True after ``finish``."""
        rows: list = []
        for item in batch:
            if item[0] == "steps":
                rows += item[1]
                continue
            if rows:
                for b in self.backends:
                    self._call(b, "steps", rows)
                rows = []
            if item[0] == "params":
                for b in self.backends:
                    self._call(b, "params", item[1])
            elif item[0] == "finish":
                for b in self.backends:
                    self._call(b, "finish", item[1], item[2])
                return True
        if rows:
            for b in self.backends:
                self._call(b, "steps", rows)
        return False

"""What an engine is: how a backend's per-node launch gets onto machines.

A backend builds the command one node runs (``torchrun ...``, ``deepspeed ...``,
``python gaudi_spawn.py ...``).  The ``local`` engine runs it here.  Engines past one
machine wrap it into what their scheduler takes -- a Slurm batch script, a Kubernetes
PyTorchJob manifest, an AWS Batch multi-node job definition, a torchrun rendezvous per
node -- as generated files plus the submit command.  Like backends, engines are data
plus one method, and they never run anything themselves: an engine with a cluster scheduler
keeps what it submits in the plan (``Plan.request``) and its scheduler
(``accelctl.engines.scheduler``) submits, follows and cancels the job for the run's supervisor.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from accelctl.backends.base import Built
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Plan
from accelctl.engines import local_settings
from accelctl.errors import Diagnostic, PlanError
from accelctl.language.plugins import EngineRow
from accelctl.workload.types import EngineSpec, TargetSpec, WorkloadSpec

if TYPE_CHECKING:  # a check's result type: imported by the checks (plan --check), not by planning
    from accelctl.backends.findings import CheckResult


class Engine:
    #: the engine's facts (``accelctl.language.plugins.EngineRow``, in its small ``<engine>_settings``
    #: module): its name, summary and settings are the row's
    row: EngineRow | None = None
    name: str = ""
    summary: str = ""
    #: backends whose per-node command this engine knows how to place
    backends: tuple[str, ...] = ()
    #: ``engine <name> { ... }`` settings -> value type, the row's (which the schema reads)
    settings: Mapping[str, Any] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        row = cls.__dict__.get("row")
        if row is not None:
            cls.name, cls.summary, cls.settings = row.name, row.summary, row.settings

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec, backend: str) -> list[str]:
        if self.backends and backend not in self.backends:
            return [f"engine {self.name} does not place {backend} launches"]
        return []

    def wrap(self, spec: WorkloadSpec, target: TargetSpec, built: Built, job: WorkerJob,
             settings: EngineSpec) -> Built:
        """Turn the backend's per-node launch(es) into this engine's submission."""
        raise NotImplementedError

    def node_plan(self, plan: Plan) -> Plan:
        """The per-node plan inside ``plan``, as the backend built it for one node (what the
        backend's own check reads); the local engine's plan is that already."""
        return plan

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """``plan``'s submission checked by the scheduler's own software where it is installed
        (``accelctl plan --check``), like ``Backend.check``; ``[]`` when there is nothing to ask."""
        return []

    def start_blocker(self, plan: Plan, runs_root: Path) -> str | None:
        """Why ``plan``'s submission cannot start from this machine (no cluster configured, a
        runs folder ``runs_root`` the job cannot reach), in one line, checked by ``accelctl run``
        before it launches anything; None: go ahead."""
        return None

    def sh_preflight(self, plan: Plan) -> list[str]:
        """The lines a ``plan -f sh`` script of ``plan`` runs before it writes anything (its
        run folder is ``$run_dir``): what ``start_blocker`` checks for ``accelctl run``, in sh;
        each refusal prints one line and exits 1.  ``[]``: nothing to check."""
        return []

    def explain_failure(self, plan: Plan, log_text: str, started: dict[str, bool],
                        values: dict[str, str] | None = None) -> str | None:
        """A launch of ``plan`` exited non-zero without reporting why: this engine's reading of
        the run's log (``started``: launch name -> started here and running until then;
        ``values``: the run's picked placeholders), or None to keep the runner's generic message."""
        return None


class LocalEngine(Engine):
    row = local_settings.ROW

    def wrap(self, spec, target, built, job, settings):
        return built


def engine_refusal(code: str, engine: str, spec: WorkloadSpec, target: TargetSpec, key: str, message: str,
                   hint: str) -> PlanError:
    """An engine's plan-time refusal, positioned at the ``engine <name> {}`` block's ``key``,
    else the target's ``engine =`` line, else the target's header."""
    span = (spec.origins.get(f"engines.{engine}.{key}") or spec.origins.get(f"targets.{target.name}.engine")
            or spec.origins.get(f"targets.{target.name}"))
    return PlanError(diagnostics=[Diagnostic(code, message, span, spec.path, hint)])

"""Plans: inert, printable descriptions of exactly what a run would execute.

A ``Plan`` holds the launch commands (argv lists, never shell strings), their
environment, and the files to generate (the worker's ``job.json``, a ds_config, a
hostfile, an sbatch script...).  Paths inside the run folder are written with the
placeholder ``{run_dir}``, which the runner substitutes when it materialises the plan
(likewise ``{free_port}``: a TCP port free on this machine, one per run).
Two argv heads are symbolic so a plan prints the same on every machine: ``python``
(the interpreter accelctl runs under) and ``torchrun``.  Only the runner turns a plan
into processes (``accelctl.run.supervision.runner``).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from accelctl.contract import codec
from accelctl.contract.job import WorkerJob
from accelctl.contract.placeholders import ENV_PLACEHOLDERS, FREE_PORT, RUN_DIR  # noqa: F401  (the plan's placeholders)
from accelctl.frozen import Value, field, to_dict
from accelctl.language.values import control_character
from accelctl.workload.types import TrackSpec



class Launch(Value):
    """One command to start (on one host, or one per node for a multi-node engine)."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    #: processes this command starts (torchrun --nproc_per_node etc.), for display
    processes: int = 1
    #: run this launch to completion (exit 0) before starting the launches after it, e.g. a
    #: pre-compilation pass (``neuron_parallel_compile``); launches without it start together
    #: (one per node).  A non-zero exit stops the run.
    wait: bool = False
    #: working directory of the command ("" = the runner's own).  Vendor example commands
    #: are documented relative to their folder (optimum-habana's
    #: ``python ../gaudi_spawn.py ... run_generation.py`` runs in
    #: ``examples/text-generation``); ``{optimum_habana}`` stands for that checkout
    #: (``OPTIMUM_HABANA_DIR``), substituted like ``{run_dir}``.
    cwd: str = ""

    def shell(self) -> str:
        """The command as a POSIX shell line, every word quoted (``cd DIR &&`` first when
        the launch has a working directory)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        cmd = " ".join(shlex.quote(a) for a in self.argv)
        line = f"{env} {cmd}".strip()
        return f"cd {shlex.quote(self.cwd)} && {line}" if self.cwd else line


class GeneratedFile(Value):
    """A file the plan writes into the run folder before launching."""

    path: str
    content: str
    #: what the file is for, shown in ``accelctl plan``
    role: str = ""
    executable: bool = False
    #: its ``{run_dir}``-style placeholders are filled when the run folder is written; False:
    #: data (a job, a request) written exactly as planned, every string as the workload wrote it
    template: bool = True


class Rehearsal(Value):
    """What a CPU rehearsal stands for (``accelctl run --rehearse``): the accelerator target,
    and how this run differs from it."""

    #: the accelerator target rehearsed
    of: str
    #: its device kind and process count
    device: str
    world_size: int
    #: how the rehearsal differs from the target's plan, one line each
    changes: tuple[str, ...] = ()
    #: where it runs: "this CPU" (eager PyTorch, the default), or the target backend's own
    #: device path on this CPU, e.g. "the XLA CPU device (torch-xla 2.9.0)" for a Neuron target
    on: str = "this CPU"


class PlanFacts(Value):
    """The numbers a plan was judged by, for scripts (``plan --json``) and summaries: the
    model's parameter count and the memory per device by term, in bytes, of the shape used."""

    params: float = 0.0
    #: weights, gradients, optimizer, activations, kv_cache, reserve, data, total, capacity
    #: (capacity 0: the host's memory, which changes by the minute)
    memory_per_device: dict[str, float] = {}
    fits: bool = True
    #: "real" or "stand-in": whose shape the figures are
    basis: str = ""


class Plan(Value):
    workload: str
    target: str
    backend: str
    engine: str
    device: str
    launches: tuple[Launch, ...]
    files: tuple[GeneratedFile, ...]
    job: WorkerJob
    #: facts worth showing with the plan: memory fit, chosen threads, stand-in weights...
    notes: tuple[str, ...] = ()
    #: warnings that do not stop the plan (bf16 on a CPU without native bf16...)
    warnings: tuple[str, ...] = ()
    #: set when this plan is a CPU rehearsal of an accelerator target
    rehearsal: Rehearsal | None = None
    #: live logging by the runner (``track { ... }``, paths made absolute); None: none
    tracking: TrackSpec | None = None
    #: what the engine's scheduler submits (``accelctl.engines.scheduler``), as data: the batch
    #: script and each node's launch, the PyTorchJob, the Batch requests; None: the launches
    #: run from here.  The rendered files are made from it, never read back into it.
    request: dict[str, Any] | None = None
    #: the numbers the plan was judged by (None: a plan written before they were kept)
    facts: PlanFacts | None = None

    def unwritable(self, nul_only: bool = False) -> str | None:
        """Where a launch word, environment value, folder or generated file holds a NUL or
        another control character but tab and newline (``nul_only``: a NUL) (``None``:
        nowhere): what cannot pass an exec or is not one line of a hostfile, script or document
        as written.  The check pass refuses such values at their line; a plan holding one is
        refused whole."""
        texts = [(f"file {f.path}", f.content) for f in self.files]
        for ln in self.launches:
            texts += [(f"launch {ln.name}", t) for t in (*ln.argv, *ln.env, *ln.env.values(), ln.cwd)]
        for where, text in texts:
            bad = ("\\x00" if "\0" in text else None) if nul_only else control_character(text)
            if bad is not None:
                return f"{where} would hold the control character {bad}"
        return None

    def to_dict(self) -> dict[str, Any]:
        d = to_dict(self)
        d["job"] = self.job.to_dict()
        if self.tracking is None:  # written only where the workload has a track block
            d.pop("tracking")
        if self.request is None:  # written only for an engine with a scheduler
            d.pop("request")
        if self.facts is None:
            d.pop("facts")
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        return codec.from_dict(cls, d)

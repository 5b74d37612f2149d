"""The preflight of a plan: the same launches, engine and rendezvous, a seconds-long worker.

``preflight_plan(plan)`` swaps accelctl's worker module (``accelctl.worker``) for
``accelctl.worker.preflight`` wherever the plan names it -- a launch's argv word
(``torchrun ... -m accelctl.worker``, ``deepspeed --module ... accelctl.worker``) and the
generated files that start it (the Slurm batch script, gaudi_spawn.py's shim) -- and leaves
everything else as planned: the same ``#SBATCH`` shape, the same torchrun rendezvous (its
``join_timeout`` included), the same DeepSpeed launcher, the same ``job.json``.  So what a
preflight proves (every node reaches the rendezvous, the collective backend carries an
all-reduce over the whole world) is what the real run needs.  A plan that never starts the
worker (an optimum-habana example script) has no preflight: ``None``.
"""

from __future__ import annotations

import re

from accelctl import entrypoints
from accelctl.contract.plan import Plan
from accelctl.frozen import replace

WORKER_MODULE = entrypoints.WORKER
PREFLIGHT_MODULE = entrypoints.PREFLIGHT
#: the module name as a whole word of a generated file (not ``accelctl.worker.x``, not a path)
_WORD = re.compile(r"(?<![\w./])accelctl\.worker(?![\w./])")


def preflight_plan(plan: Plan) -> Plan | None:
    launches = tuple(replace(ln, argv=tuple(PREFLIGHT_MODULE if a == WORKER_MODULE else a
                                            for a in ln.argv)) for ln in plan.launches)
    files = tuple(replace(f, content=_WORD.sub(PREFLIGHT_MODULE, f.content)) for f in plan.files)
    if launches == plan.launches and files == plan.files:
        return None
    note = ("PREFLIGHT: init_process_group + one all-reduce + barrier over the planned world, "
            "through the same launches and engine")
    # a preflight is not a run of the workload: nothing of it goes to the experiment trackers
    return replace(plan, launches=launches, files=files, notes=(note, *plan.notes), tracking=None)

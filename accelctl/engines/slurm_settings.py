"""``engine slurm { ... }``: the settings of the slurm engine (``accelctl.engines.slurm``).

What a Slurm name (partition, account, QOS), a constraint expression (features joined by
``& | ,`` with ``[] () *`` counts) and a gres may hold: checked where the setting is written
(E216) and again by the engine before a value reaches an ``#SBATCH`` line (E547), stated once here.
"""

from __future__ import annotations

from accelctl.engines.settings import IMAGE
from accelctl.language import values as V
from accelctl.language.plugins import EngineRow

NAME_PATTERN = r"[A-Za-z0-9_.-]+"
CONSTRAINT_PATTERN = r"[A-Za-z0-9_.,&|\[\]()*:-]+"
GRES_PATTERN = r"[A-Za-z0-9_.,:-]+"
_NAME = V.token(NAME_PATTERN, '"debug"', "Slurm name")

SETTINGS: dict[str, V.VType] = {
    "partition": _NAME,
    "account": _NAME,
    "qos": _NAME,
    "constraint": V.token(CONSTRAINT_PATTERN, '"a100&ib"', "Slurm constraint"),
    "time_limit": V.quantity("time"),
    "cpus_per_task": V.integer(1, 4096),
    "mem": V.quantity("bytes"),
    "gres": V.token(GRES_PATTERN, '"gpu:1"', "Slurm gres"),
    "container_image": IMAGE,
}

ROW = EngineRow(
    name="slurm",
    engine="accelctl.engines.slurm:SlurmEngine",
    summary="Slurm batch job (sbatch), one launcher agent per node (torchrun c10d, deepspeed --no_ssh)",
    settings=SETTINGS,
    meanings={
        "partition": "Slurm partition", "account": "Slurm account", "qos": "Slurm QOS", "constraint": "node features",
        "time_limit": "job time limit", "cpus_per_task": "CPUs per task", "mem": "memory per node",
        "gres": "generic resources, e.g. \"gpu:8\"", "container_image": "container image (pyxis/enroot)",
    },
    code="E547",
    refuses="`engine slurm`: a `partition`/`account`/`qos`/`constraint`/`gres` with a character a `#SBATCH` line "
            "cannot take, `container_image` (not supported yet), or a backend build that is not one launch per node",
    scheduler="accelctl.engines.slurm_scheduler:SlurmScheduler",
    image_note="engine slurm does not pass it (pyxis/enroot --container-image is not built yet); the nodes must run "
               "that image's software",
)

"""Every ``ACCELCTL_*`` environment variable, named once.

A plan writes them, the runner or the worker reads them; both sides import the name
from here so a rename cannot leave one side behind.
"""

from __future__ import annotations

#: run store root (``accelctl run`` / ``runs`` / ``report``; default ./runs)
RUNS_DIR = "ACCELCTL_RUNS_DIR"
#: folder where each rank appends ``rank<N>.jsonl`` (set by the runner for every launch)
EVENTS_DIR = "ACCELCTL_EVENTS_DIR"
#: DeepSpeed training config (``ds_config.json``) the worker hands to ``deepspeed.initialize``
DS_CONFIG = "ACCELCTL_DS_CONFIG"
#: DeepSpeed-inference config (``ds_inference.json``) for ``deepspeed.init_inference``
DS_INFERENCE_CONFIG = "ACCELCTL_DS_INFERENCE_CONFIG"
#: "0": mark DeepSpeed's shared-memory all-reduce op incompatible (CPU plans; avoids its JIT build)
DS_SHM_COMM = "ACCELCTL_DS_SHM_COMM"
#: Transformer Engine layer/recipe settings (``te_recipe.json``)
TE_CONFIG = "ACCELCTL_TE_CONFIG"
#: GaudiConfig (``gaudi_config.json``): autocast, fused AdamW, fused clip-norm on HPU
GAUDI_CONFIG = "ACCELCTL_GAUDI_CONFIG"
#: DataLoader worker processes per rank (torch-xla's MpDeviceLoader feeds from them)
DATALOADER_WORKERS = "ACCELCTL_DATALOADER_WORKERS"
#: niceness of the TUI's render thread (0 turns it off)
TUI_NICE = "ACCELCTL_TUI_NICE"
#: where ``accelctl doctor --calibrate`` stores the measured matmul ceilings (default
#: ``$XDG_CACHE_HOME/accelctl/calibration.json``, else ``~/.cache/accelctl/calibration.json``)
CALIBRATION_FILE = "ACCELCTL_CALIBRATION_FILE"

#: where ``accelctl.models.meta_facts`` keeps the facts read from models built on the meta device
#: (default ``$XDG_CACHE_HOME/accelctl/model-facts``; ``off``: no cache).  The models layer sits
#: below this module, so ``meta_facts.ENV`` spells it again (tests/models/test_meta_facts.py)
MODEL_FACTS_CACHE = "ACCELCTL_MODEL_FACTS_CACHE"

#: the runner's identity, ``<pid>:<start ticks>`` (``accelctl.contract.supervision``): a
#: worker on the runner's machine ends when that process is gone (SIGKILL of ``accelctl run``)
RUNNER = "ACCELCTL_RUNNER"

#: test hook: every n-th training batch keeps half its samples (a ragged last batch that a
#: loader kept, ``drop_last=False``): the shape change torch-xla recompiles for
DEBUG_RAGGED_BATCH_EVERY = "ACCELCTL_DEBUG_RAGGED_BATCH_EVERY"

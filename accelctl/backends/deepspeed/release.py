"""The DeepSpeed release plans are written for, and what of it both the planner
(``accelctl.backends.deepspeed.backend``) and the checks (``check``, ``inject_check``) read:
the pinned releases, the config files DeepSpeed is handed, AutoTP's families, and a package's
installed version.  Pure data and metadata lookups: importing it imports nothing, so the checks
can depend on it without depending on the planner.
"""

from __future__ import annotations

#: the DeepSpeed release these plans are written and checked against (pyproject extra)
DEEPSPEED_VERSION = "0.19.8"
#: the transformers release the worker environment pins (pyproject): what a plan for a device
#: on another machine is written for (a plan for the host CPU reads the installed one)
TRANSFORMERS_VERSION = "5.23.0"

CONFIG_FILE = "ds_config.json"
INFERENCE_FILE = "ds_inference.json"

#: families DeepSpeed AutoTP (tensor parallel without kernel injection) can shard; from
#: ``deepspeed/module_inject/auto_tp.py`` ``AutoTP.supported`` (ds_check compares).
#: False: DeepSpeed asserts "AutoTP not supported for model. Please use kernel injection".
AUTOTP = {"bloom": True, "gpt2": False, "llama": True, "bert": True, "t5": True, "mistral": True, "qwen2": True,
          "gemma": True, "mixtral": True, "gpt_neox": True, "falcon": True}
#: the base model class name AutoTP.supported() sees for a family (``str(model)``)
AUTOTP_CLASS = {"bloom": "BloomModel", "gpt2": "GPT2Model", "llama": "LlamaModel", "bert": "BertModel",
                "t5": "T5Model", "mistral": "MistralModel", "qwen2": "Qwen2Model", "gemma": "GemmaModel",
                "mixtral": "MixtralModel", "gpt_neox": "GPTNeoXModel", "falcon": "FalconModel"}


def installed_version(dist: str) -> str | None:
    """A package's installed version from its metadata (never imports it)."""
    import importlib.metadata  # imports email/zipfile/csv: only plans that ask pay it

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None

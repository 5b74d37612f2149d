"""Which models read from their own module (the ``transformers`` family) a Gaudi target runs.

Gaudi's stack is optimum-habana, whose 1.21.2 pins transformers < 4.56 and adapts that release's
classes to the HPU (``adapt_transformers_to_gaudi``) for the model types it lists as optimized
(``MODELS_OPTIMIZED_WITH_STATIC_SHAPES``, optimum/habana/transformers/generation/utils.py).  A
model accelctl knows only from its class is planned on Gaudi only where its model_type is one of
them; another (phi3) is refused at the model line, naming the release.  ``tests`` compare the
list with the installed optimum-habana where ``.venv-habana`` holds it.
"""

from __future__ import annotations

from collections.abc import Callable

from accelctl.models.param_count import FROM_MODULE
from accelctl.workload.types import WorkloadSpec

#: the release the list is read from, and the transformers it pins
OPTIMUM_HABANA = "1.21.2"
TRANSFORMERS_PIN = "< 4.56"
#: optimum-habana 1.21.2's MODELS_OPTIMIZED_WITH_STATIC_SHAPES, in its order
OPTIMIZED = (
    "bloom", "gpt2", "opt", "gptj", "gpt_neo", "gpt_neox", "gpt_oss", "llama", "falcon", "codegen", "gpt_bigcode",
    "bart", "mpt", "t5", "mistral", "phi", "mixtral", "gemma", "gemma2", "gemma3", "gemma3_text", "blip_text_model",
    "seamless_m4t", "starcoder2", "persimmon", "qwen2", "llava", "llava_next", "llava_onevision", "stablelm", "mamba",
    "deci", "cohere", "qwen2_moe", "xglm", "whisper", "paligemma", "idefics2", "mllama", "video_llava", "minicpm3",
    "baichuan", "deepseek_v2", "deepseek_v3", "chatglm", "qwen2_vl", "qwen3", "qwen3_moe", "arctic",
)


def model_type_limits(spec: WorkloadSpec, no: Callable[..., None]) -> None:
    """``no(reason, "model")`` where the model is read from its module and optimum-habana does
    not optimize its model_type."""
    m = spec.model
    if m.family != FROM_MODULE:
        return
    model_type = str(m.real_shape.get("model_type", ""))
    if model_type not in OPTIMIZED:
        no(f"Gaudi runs transformers {TRANSFORMERS_PIN} adapted by optimum-habana {OPTIMUM_HABANA}, which does not "
           f"list model_type {model_type!r} among the model types it optimizes for the HPU ({', '.join(OPTIMIZED)}); "
           "plan this model on a CUDA or CPU target", "model")

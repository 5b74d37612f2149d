"""The model-shaped rules of a parallel layout (E416): what tensor and pipeline parallel
need of the model the target runs -- the stand-in on the host, the real shape elsewhere.

Tensor parallel splits attention by heads (each rank a whole number of query heads and of
key/value heads) and needs the family's parallelize plan (``parallel_plans.PLANS``);
pipeline parallel needs a block per stage at least, the family's stage split, and for 1F1B
a micro-batch per stage in flight (``accumulation ≥ pp``).  Sequence parallel needs tensor
parallel (tp > 1) and a sequence tp divides: each rank's norms run on an equal slice of it.
"""

from __future__ import annotations

from typing import Any

from accelctl.models.parallel_plans import PIPELINE_FAMILIES, PLANS

CODE = "E416"
#: the strategies these rules are for (the worker's DeviceMesh strategies)
MESH_STRATEGIES = ("fsdp", "tensor", "pipeline")


def problems(parallel, family: str, shape: dict[str, Any], accumulation: int, nxd: bool = False,
             training: bool = True) -> list[tuple[str, str]]:
    """(message, hint) of each rule ``parallel`` breaks for a ``family`` model of ``shape``.
    ``nxd``: the device's tensor parallel is neuronx-distributed's (its backend checks the
    family against optimum-neuron's models), which replicates key/value heads and, outside
    training, pads query heads: only training's query heads must divide by tp."""
    if parallel.strategy not in MESH_STRATEGIES:  # ZeRO / DeepSpeed-inference split their own way
        return []
    tp, pp, out = parallel.tp, parallel.pp, []
    # a model read from its class is named by its model_type (the family says only where it came from)
    name = f"{shape['model_type']} (read from its transformers class)" if shape.get("model_type") else family
    if tp > 1 and nxd:
        heads = shape.get("heads")
        if training and heads and heads % tp:
            out.append((f"tp = {tp} does not divide the model's {heads} heads (neuronx-distributed's training "
                        "splits query heads evenly)", f"use a tp that divides {heads}"))
    elif tp > 1:
        if family not in PLANS:
            out.append((f"{name} has no tensor-parallel plan", f"tensor parallel plans: {', '.join(PLANS)}; "
                        "shard it with parallel = fsdp (each decoder layer) or zero(stage = 3)"))
        else:
            for key in PLANS[family].head_keys:
                heads = shape.get(key)  # kv_heads absent: as many key/value heads as heads (checked once)
                if heads and heads % tp:
                    what = "key/value heads" if key == "kv_heads" else "heads"
                    out.append((f"tp = {tp} does not divide the model's {heads} {what}",
                                f"use a tp that divides {heads}"))
    if parallel.sequence_parallel and tp == 1:
        out.append(("sequence_parallel = on splits the sequence over the tensor-parallel ranks; tp is 1",
                    "set tp = 2 or more, or remove sequence_parallel"))
    if pp > 1:
        layers = shape.get("layers", 0)
        if family not in PIPELINE_FAMILIES:
            out.append((f"{name} has no pipeline stage split", f"pipeline stages: {', '.join(PIPELINE_FAMILIES)}"))
        elif layers and pp > layers:
            out.append((f"pp = {pp} is more stages than the model's {layers} layers",
                        f"use pp ≤ {layers}"))
        if parallel.schedule == "one_f_one_b" and accumulation < pp:
            out.append((f"one_f_one_b keeps pp = {pp} micro-batches in flight; accumulation is {accumulation}",
                        f"set batch accumulation ≥ {pp}, or schedule = gpipe"))
    return out


def positions(family: str, shape: dict[str, Any], seq_len: int, image_size: int) -> tuple[int, str]:
    """The sequence a block runs on, and what it is made of: a ViT's patches and its class
    token, else the dataset's sequence length."""
    if family == "vit":
        patches = (int(shape.get("image_size", image_size)) // int(shape.get("patch", 16))) ** 2
        return patches + 1, f"{patches} patches + the class token"
    return seq_len, "the dataset's seq_len"


def sequence_problem(parallel, family: str, shape: dict[str, Any], seq_len: int,
                     image_size: int) -> tuple[str, str] | None:
    """(message, hint) when sequence parallel cannot split this model's sequence evenly."""
    if not parallel.sequence_parallel or parallel.tp <= 1 or family not in PLANS:
        return None
    n, made_of = positions(family, shape, seq_len, image_size)
    if n % parallel.tp == 0:
        return None
    hint = ("a ViT's class token makes its sequence odd: use tensor parallel without sequence_parallel"
            if family == "vit" else f"use a seq_len that tp = {parallel.tp} divides")
    return (f"sequence_parallel splits the sequence evenly over tp = {parallel.tp} ranks; the model's {n} "
            f"positions ({made_of}) do not divide by it", hint)

"""Which linear layers of a model run in FP8 and which stay in bf16 (pure data, no torch).

A linear converts (torchao's ``convert_to_float8_training``) when both dims are multiples of
``FP8_DIM`` (``torch._scaled_mm``'s rule) and it is not an output head (``HEADS``): as torchtitan
and TE's block swap, heads stay out (wide logit range, few FLOPs).  Not linears, so never FP8:
embeddings, convolutions, attention's products, norms, and Mixtral's fused 3-D experts, whose
torchao FP8 path cannot run or be rehearsed on a CPU: the plan states their bf16 share
(``EXPERTS_KEPT``).  ``linears(family, shape, seq, target)`` lists a model's linears by module
name; the plan prints the split, the worker converts by the same rule (``is_head``, ``FP8_DIM``)
and the estimate times the two parts at the FP8 and bf16 peaks.  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from typing import Any

from accelctl.frozen import Value
from accelctl.models.catalog import FAMILIES

#: torch._scaled_mm needs both GEMM dimensions of a weight divisible by this
FP8_DIM = 16
#: the output heads kept in bf16 (full module names)
HEADS = ("lm_head", "head", "classifier", "cls.predictions.decoder")
LLAMA_LIKE = ("llama", "mistral", "qwen2", "gemma", "mixtral")
#: why Mixtral's experts stay in bf16 (the module docstring has the whole finding)
EXPERTS_KEPT = ("fused 3-D expert tensors, not nn.Linear; torchao 0.18's FP8 grouped GEMM for them "
                "(prototype.moe_training Float8TrainingOpConfig) needs Triton and torch._scaled_grouped_mm on "
                "CUDA sm90+, with no emulation to rehearse or check it on a CPU: not planned")


class Linear(Value):
    """``count`` linear modules named ``name`` (``*`` = the layer index), each ``d_in`` -> ``d_out``
    over ``tokens`` tokens of one sample."""

    name: str
    count: int
    d_in: int
    d_out: int
    tokens: int

    def flops(self) -> float:
        """Forward FLOPs of one sample through these modules."""
        return 2.0 * self.count * self.d_in * self.d_out * self.tokens

    def keep_reason(self) -> str:
        """Why these stay in bf16 ("" = they go FP8)."""
        if is_head(self.name):
            return "output head"
        bad = [str(d) for d in (self.d_in, self.d_out) if d % FP8_DIM]
        return f"{' and '.join(bad)} not a multiple of {FP8_DIM}" if bad else ""

    def label(self) -> str:
        return f"{self.name} ({self.d_in}x{self.d_out}{f' x{self.count}' if self.count > 1 else ''})"


def is_head(name: str) -> bool:
    return name in HEADS


def _decoder(family: str, s: dict[str, Any], seq: int) -> list[Linear]:
    from accelctl.models import param_count as P

    h, L = int(s["hidden"]), int(s["layers"])
    ffn = int(s.get("ffn") or 4 * h)
    if family in LLAMA_LIKE:
        g = P.dims(family, s)
        a = "model.layers.*.self_attn."
        out = [Linear(a + "q_proj", L, h, g.q, seq), Linear(a + "k_proj", L, h, g.kv, seq),
               Linear(a + "v_proj", L, h, g.kv, seq), Linear(a + "o_proj", L, g.q, h, seq)]
        if family != "mixtral":  # mixtral's experts are fused tensors, not nn.Linear
            m = "model.layers.*.mlp."
            out += [Linear(m + "gate_proj", L, h, g.ffn, seq), Linear(m + "up_proj", L, h, g.ffn, seq),
                    Linear(m + "down_proj", L, g.ffn, h, seq)]
        return out
    qkv = 3 * h
    if family == "falcon":
        g = P.dims(family, s)
        qkv = g.q + 2 * g.kv
    prefix, attn, qkv_name, proj, up, down = {
        "gpt2": ("transformer.h.*.", "attn.", "c_attn", "c_proj", "mlp.c_fc", "mlp.c_proj"),
        "bloom": ("transformer.h.*.", "self_attention.", "query_key_value", "dense", "mlp.dense_h_to_4h",
                  "mlp.dense_4h_to_h"),
        "falcon": ("transformer.h.*.", "self_attention.", "query_key_value", "dense", "mlp.dense_h_to_4h",
                   "mlp.dense_4h_to_h"),
        "gpt_neox": ("gpt_neox.layers.*.", "attention.", "query_key_value", "dense", "mlp.dense_h_to_4h",
                     "mlp.dense_4h_to_h"),
    }[family]
    return [Linear(prefix + attn + qkv_name, L, h, qkv, seq), Linear(prefix + attn + proj, L, h, h, seq),
            Linear(prefix + up, L, h, ffn, seq), Linear(prefix + down, L, ffn, h, seq)]


def linears(family: str, s: dict[str, Any], seq: int = 128, target: int = 32) -> list[Linear]:
    """The linear layers of ``family`` in shape ``s`` (the family's defaults filled in)."""
    if family not in FAMILIES:
        return []
    s = {**FAMILIES[family].shape, **s}
    if family not in ("bert", "t5", "vit", "stable_diffusion"):
        return [*_decoder(family, s, seq), Linear("lm_head", 1, int(s["hidden"]), int(s["vocab"]), seq)]
    if family == "stable_diffusion":
        return []
    h, L = int(s["hidden"]), int(s["layers"])
    if family == "vit":
        ffn, n = int(float(s.get("mlp_ratio", 4.0)) * h), (int(s["image_size"]) // int(s["patch"])) ** 2 + 1
        return [Linear("blocks.*.attn.qkv", L, h, 3 * h, n), Linear("blocks.*.attn.proj", L, h, h, n),
                Linear("blocks.*.mlp.fc1", L, h, ffn, n), Linear("blocks.*.mlp.fc2", L, ffn, h, n),
                Linear("head", 1, h, int(s["classes"]), 1)]  # the class token only
    ffn = int(s.get("ffn") or 4 * h)
    if family == "bert":
        a, ly = "bert.encoder.layer.*.attention.", "bert.encoder.layer.*."
        return [*(Linear(a + "self." + x, L, h, h, seq) for x in ("query", "key", "value")),
                Linear(a + "output.dense", L, h, h, seq), Linear(ly + "intermediate.dense", L, h, ffn, seq),
                Linear(ly + "output.dense", L, ffn, h, seq), Linear("cls.predictions.transform.dense", 1, h, h, seq),
                Linear("cls.predictions.decoder", 1, h, int(s["vocab"]), seq)]
    inner = int(s["heads"]) * int(s.get("kv") or h // int(s["heads"]))

    def attention(prefix: str, q_tokens: int, kv_tokens: int) -> list[Linear]:
        return [Linear(prefix + "q", L, h, inner, q_tokens), Linear(prefix + "k", L, h, inner, kv_tokens),
                Linear(prefix + "v", L, h, inner, kv_tokens), Linear(prefix + "o", L, inner, h, q_tokens)]

    def mlp(prefix: str, tokens: int) -> list[Linear]:
        return [Linear(prefix + "wi", L, h, ffn, tokens), Linear(prefix + "wo", L, ffn, h, tokens)]

    return [*attention("encoder.block.*.layer.0.SelfAttention.", seq, seq),
            *mlp("encoder.block.*.layer.1.DenseReluDense.", seq),
            *attention("decoder.block.*.layer.0.SelfAttention.", target, target),
            *attention("decoder.block.*.layer.1.EncDecAttention.", target, seq),
            *mlp("decoder.block.*.layer.2.DenseReluDense.", target),
            Linear("lm_head", 1, h, int(s["vocab"]), target)]


class Split(Value):
    """A model's linears split into those FP8 runs and those kept in bf16 (with the reason)."""

    fp8: tuple[Linear, ...]
    kept: tuple[tuple[Linear, str], ...]
    #: what is never a linear here (said in the plan)
    not_linear: str
    #: Mixtral's routed experts (their active top-k per token), kept in bf16 (``EXPERTS_KEPT``)
    experts: Linear | None = None

    def fp8_flops(self) -> float:
        return sum(x.flops() for x in self.fp8)

    def modules(self) -> int:
        return sum(x.count for x in self.fp8)

    def lines(self) -> list[str]:
        """The plan's wording."""
        out = [f"FP8 (Float8Linear): {self.modules()} linear layer(s): " + ", ".join(x.label() for x in self.fp8)]
        kept = ", ".join(f"{x.label()}: {why}" for x, why in self.kept)
        out.append(f"kept in bf16: {kept or 'no linear layer'}; never FP8 (not nn.Linear): {self.not_linear}")
        if self.experts is not None:
            out.append(f"experts kept in bf16: {self.experts.label()}, {self.experts_share():.1%} of the weight "
                       f"GEMM FLOPs: {EXPERTS_KEPT}")
        return out

    def experts_share(self) -> float:
        """The experts' share of the FLOPs of every weight GEMM (linears and experts)."""
        if self.experts is None:
            return 0.0
        total = self.experts.flops() + self.fp8_flops() + sum(x.flops() for x, _ in self.kept)
        return self.experts.flops() / total if total else 0.0


def split(family: str, s: dict[str, Any], seq: int = 128, target: int = 32) -> Split:
    fp8, kept = [], []
    for layer in linears(family, s, seq, target):
        why = layer.keep_reason()
        (kept.append((layer, why)) if why else fp8.append(layer))
    not_linear = "embeddings, attention's Q·Kᵀ and A·V, norms"
    if family == "vit":
        not_linear = "the patch embedding (Conv2d), " + not_linear
    experts = None
    if family == "mixtral":
        not_linear = "the experts and router (fused tensors in transformers 5), " + not_linear
        experts = _experts({**FAMILIES[family].shape, **s}, seq)
    return Split(tuple(fp8), tuple(kept), not_linear, experts)


def _experts(s: dict[str, Any], seq: int) -> Linear:
    """Mixtral's routed experts as the GEMMs one token runs: its top-k experts' gate, up and
    down projections (``count`` = layers × top-k × 3 matrices of h × f)."""
    from accelctl.models import param_count as P

    g = P.dims("mixtral", s)
    return Linear(f"model.layers.*.mlp.experts (gate_up_proj, down_proj; top-{g.active_experts} of {g.experts})",
                  int(s["layers"]) * g.active_experts * 3, g.hidden, g.ffn, seq)

"""accelctl's parameter formulas against transformers' own classes, built on the meta device
(shapes only, no memory) from the real models' config.json kept as test data
(tests/data/hf_configs/, workloads/configs/), against the published sizes, and against the
facts ``accelctl.models.meta_facts`` reads from the same classes.  The configs of families
with no formula (gemma2, phi3, deepseek_v2) are refused by the formulas and counted only by
the module (tests/models/test_meta_facts.py), through which they are planned
(tests/plan/test_module_family.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelctl.models import hf_config, param_count

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {p.stem: p for p in [*sorted((ROOT / "tests/data/hf_configs").glob("*.json")),
                               *sorted((ROOT / "workloads/configs").glob("*.json"))]}

#: config file -> (family, published total parameters, published active parameters)
PUBLISHED = {
    "Qwen2.5-7B": ("qwen2", 7.62e9, None),
    "Llama-2-7b-hf": ("llama", 6.74e9, None),
    "Llama-2-70b-hf": ("llama", 68.98e9, None),  # "70B": 68.98 B as LlamaForCausalLM builds it (GQA, 8 kv heads)
    "Meta-Llama-3-8B": ("llama", 8.03e9, None),
    "Mistral-7B-v0.1": ("mistral", 7.24e9, None),
    "Mixtral-8x7B-v0.1": ("mixtral", 46.7e9, 12.9e9),
    "Qwen2-7B": ("qwen2", 7.62e9, None),
    "falcon-7b": ("falcon", 6.92e9, None),
    "gemma-7b": ("gemma", 8.54e9, None),
    "gpt-neox-20b": ("gpt_neox", 20.6e9, None),
}


def _shape(name: str) -> tuple[str, dict]:
    return hf_config.shape_of(hf_config.read(CONFIGS[name]))


#: config files of families no formula counts: only their own module says their size
NO_FORMULA = {"gemma-2-9b": "gemma2", "Phi-3-mini-4k-instruct": "phi3", "DeepSeek-V2-Lite": "deepseek_v2"}


def test_every_config_kept_has_a_published_size():
    assert set(CONFIGS) == set(PUBLISHED) | set(NO_FORMULA)


@pytest.mark.parametrize("name", sorted(NO_FORMULA))
def test_a_family_without_formulas_is_refused_by_them(name):
    with pytest.raises(hf_config.UnknownModelType, match=NO_FORMULA[name]):
        _shape(name)


@pytest.mark.slow
def test_every_formula_equals_the_module_facts_total_and_active():
    """Each formula family's config, as ``meta_facts`` reads it from the class built on the
    meta device (one subprocess for all; ~10-20 s): the same total, and the same active
    parameters (Mixtral's two experts of eight)."""
    pytest.importorskip("transformers")
    from accelctl.models import meta_facts

    names = sorted(PUBLISHED)
    for name, got in zip(names, meta_facts.facts_of([CONFIGS[n] for n in names])):
        family, s = _shape(name)
        assert param_count.total(family, s) == got.parameters.total, name
        assert param_count.active(family, s) == got.parameters.active, name


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_formula_against_the_published_size(name):
    family, total, active = PUBLISHED[name]
    got_family, s = _shape(name)
    assert got_family == family
    assert param_count.total(family, s) == pytest.approx(total, rel=0.01)
    assert param_count.active(family, s) == pytest.approx(active or total, rel=0.01)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_formula_equals_transformers_class_on_the_meta_device(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    family, s = _shape(name)
    cfg = transformers.AutoConfig.for_model(**json.loads(CONFIGS[name].read_text()))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    counted = sum(p.numel() for p in model.parameters())
    assert param_count.total(family, s) == pytest.approx(counted, rel=0.01)
    assert param_count.total(family, s) == counted  # exact, in fact: every tensor is in the formula


def test_mixture_active_parameters_are_two_of_eight_experts():
    _, s = _shape("Mixtral-8x7B-v0.1")
    expert = 3 * s["hidden"] * s["ffn"] * s["layers"]
    assert param_count.total("mixtral", s) - param_count.active("mixtral", s) == 6 * expert


def test_variants_a_config_can_ask_for():
    """Falcon's new decoder architecture (grouped K/V heads, two norms, biases), llama with
    attention biases and a tied head, a gemma-style head_dim: the worker's own stand-in
    builder on the meta device agrees with the formula."""
    torch = pytest.importorskip("torch")
    models = pytest.importorskip("accelctl.worker.models")
    import transformers

    shapes = [
        ("falcon", {"layers": 2, "hidden": 64, "heads": 8, "kv_heads": 2, "ffn": 200, "vocab": 500,
                    "max_positions": 64, "tied": False, "new_arch": True, "parallel_attn": True, "bias": True}),
        ("falcon", {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4, "ffn": 256, "vocab": 500,
                    "max_positions": 64, "tied": True, "new_arch": False, "parallel_attn": False, "bias": False}),
        ("llama", {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 100, "vocab": 500,
                   "max_positions": 64, "tied": True, "attn_bias": True}),
        ("qwen2", {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 1, "ffn": 100, "vocab": 500,
                   "max_positions": 64, "tied": True}),
        ("gemma", {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 1, "head_dim": 48, "ffn": 100, "vocab": 500,
                   "max_positions": 64, "tied": True}),
        ("gpt_neox", {"layers": 3, "hidden": 48, "heads": 4, "ffn": 96, "vocab": 300, "max_positions": 64,
                      "tied": False}),
    ]
    for family, s in shapes:
        cls = getattr(transformers, models.HF_CLASSES[family][2])
        with torch.device("meta"):
            model = cls(models._hf_config(family, s))
        assert param_count.total(family, s) == sum(p.numel() for p in model.parameters()), (family, s)


def test_config_reader_takes_falcon_multi_query_over_num_kv_heads():
    """falcon-7b's config.json says num_kv_heads 71 and multi_query true; transformers builds
    one K/V head (the old decoder architecture reads multi_query)."""
    _, s = _shape("falcon-7b")
    assert s["kv_heads"] == 1 and not s["new_arch"] and s["tied"]


def _classic_cases():
    from accelctl.models.catalog import FAMILIES, KNOWN_MODELS

    yield from ((f"{f}-stand-in", f, dict(FAMILIES[f].shape)) for f in ("bloom", "gpt2", "bert", "t5", "vit"))
    for ref in ("bigscience/bloomz-7b1", "bert-large-uncased", "t5-3b", "gpt2", "timm/vit_base_patch16_224",
                "timm/vit_huge_patch14_224"):
        m = KNOWN_MODELS[ref]
        yield ref, m.family, {**FAMILIES[m.family].shape, **m.shape}


@pytest.mark.parametrize("name,family,s", list(_classic_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_classic_families_count_exactly_what_the_worker_builds(name, family, s):
    """bloom, gpt2, bert, t5 (attention width heads x kv, not hidden: T5-3B's 4096 on 1024)
    and timm's ViT, at their stand-in and their catalogued real shapes, built on the meta
    device by the worker's own builders."""
    torch = pytest.importorskip("torch")
    models = pytest.importorskip("accelctl.worker.models")
    from types import SimpleNamespace

    with torch.device("meta"):
        if family == "vit":
            model = models._timm_vit(SimpleNamespace(precision=SimpleNamespace(dtype="fp32")), s)
        else:
            import transformers

            model = getattr(transformers, models.HF_CLASSES[family][2])(models._hf_config(family, s))
    assert param_count.total(family, s) == sum(p.numel() for p in model.parameters())


#: the config.json keys that decide the shape of more public models (tied heads with an own
#: head_dim, Llama 3.1's rope_scaling, multi-query and grouped K/V, falcon's new decoder
#: architecture with 8 K/V groups, the RW models' biases and sequential attention)
VARIANTS = {'Llama-3.2-1B': {'model_type': 'llama',
                  'hidden_size': 2048,
                  'intermediate_size': 8192,
                  'num_attention_heads': 32,
                  'num_hidden_layers': 16,
                  'num_key_value_heads': 8,
                  'head_dim': 64,
                  'tie_word_embeddings': True,
                  'vocab_size': 128256,
                  'max_position_embeddings': 131072,
                  'rope_scaling': {'factor': 32.0,
                                   'high_freq_factor': 4.0,
                                   'low_freq_factor': 1.0,
                                   'original_max_position_embeddings': 8192,
                                   'rope_type': 'llama3'},
                  'rope_theta': 500000.0},
 'Qwen2-0.5B': {'model_type': 'qwen2',
                'hidden_size': 896,
                'intermediate_size': 4864,
                'num_attention_heads': 14,
                'num_hidden_layers': 24,
                'num_key_value_heads': 2,
                'tie_word_embeddings': True,
                'vocab_size': 151936,
                'max_position_embeddings': 131072},
 'Mistral-Nemo': {'model_type': 'mistral',
                  'hidden_size': 5120,
                  'intermediate_size': 14336,
                  'num_attention_heads': 32,
                  'num_hidden_layers': 40,
                  'num_key_value_heads': 8,
                  'head_dim': 128,
                  'vocab_size': 131072,
                  'max_position_embeddings': 1024000,
                  'tie_word_embeddings': False},
 'falcon-40b': {'model_type': 'falcon',
                'hidden_size': 8192,
                'num_attention_heads': 128,
                'num_hidden_layers': 60,
                'num_kv_heads': 8,
                'new_decoder_architecture': True,
                'parallel_attn': True,
                'bias': False,
                'vocab_size': 65024,
                'alibi': False},
 'pythia-1b': {'model_type': 'gpt_neox',
               'hidden_size': 2048,
               'intermediate_size': 8192,
               'num_attention_heads': 8,
               'num_hidden_layers': 16,
               'vocab_size': 50304,
               'max_position_embeddings': 2048,
               'tie_word_embeddings': False,
               'rotary_pct': 0.25},
 'gemma-2b': {'model_type': 'gemma',
              'hidden_size': 2048,
              'intermediate_size': 16384,
              'num_attention_heads': 8,
              'num_hidden_layers': 18,
              'num_key_value_heads': 1,
              'head_dim': 256,
              'vocab_size': 256000,
              'max_position_embeddings': 8192},
 'falcon-rw-1b': {'model_type': 'falcon',
                  'hidden_size': 2048,
                  'num_attention_heads': 32,
                  'num_hidden_layers': 24,
                  'multi_query': False,
                  'new_decoder_architecture': False,
                  'parallel_attn': False,
                  'bias': True,
                  'alibi': True,
                  'vocab_size': 50304}}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_other_hub_configs_count_exactly(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    family, s = hf_config.shape_of(VARIANTS[name])
    cfg = transformers.AutoConfig.for_model(**VARIANTS[name])
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert param_count.total(family, s) == sum(p.numel() for p in model.parameters())

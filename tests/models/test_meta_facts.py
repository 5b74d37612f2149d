"""Model facts from the real module built on the meta device (``accelctl.models.meta_facts``):
the public config.json files kept as test data give the published parameter counts exactly,
the structure each family's class builds (sliding/global layers, MLA, experts, a tied head),
the KV cache the model's own cache keeps, and the FLOPs torch's counter counts; the cache of
answers is reused, and anything wrong with an entry, a config or the subprocess is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from accelctl.models import meta_facts

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests/data/hf_configs"
SDXL = ROOT / "tests/data/diffusers/sdxl-base"

#: config file -> the exact parameter count transformers' class holds (the published figure)
EXACT = {
    "Meta-Llama-3-8B": 8_030_261_248,
    "gemma-2-9b": 9_241_705_984,
    "Phi-3-mini-4k-instruct": 3_821_079_552,
    "Qwen2.5-7B": 7_615_616_512,
    "DeepSeek-V2-Lite": 15_706_484_224,  # "15.7 B"
}
#: SDXL base's components: CLIP ViT-L's text model, OpenCLIP bigG's with its projection, the
#: UNet and the VAE, as published
SDXL_EXACT = {"text_encoder": 123_060_480, "text_encoder_2": 694_659_840, "unet": 2_567_463_684,
              "vae": 83_653_863}


@pytest.fixture(scope="module")
def facts():
    """Every config's facts, one subprocess for all (~10-20 s: the tests using it are slow; the
    session's cache keeps the answers for tests/language/test_param_count.py)."""
    pytest.importorskip("transformers")
    pytest.importorskip("diffusers")
    names = sorted(EXACT)
    got = meta_facts.facts_of([CONFIGS / f"{n}.json" for n in names] + [SDXL])
    return {**dict(zip(names, got)), "sdxl": got[-1]}


#: a two-layer llama: its facts built in this process, for the cache's tests
TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 500}


@pytest.fixture(scope="module")
def tiny():
    """``TINY``'s facts, as the subprocess would answer them, read back as ``ModelFacts``."""
    pytest.importorskip("transformers")
    from accelctl.models import module_facts

    return meta_facts.checked(json.loads(json.dumps(module_facts.answer({"config": TINY}))))


@pytest.mark.parametrize("name", sorted(EXACT))
@pytest.mark.slow
def test_exact_parameter_counts(facts, name):
    p = facts[name].parameters
    assert p.total == EXACT[name]
    assert p.total == (p.embeddings + p.attention + p.mlp + p.experts + p.router + p.shared_experts + p.norms
                       + p.lm_head + p.conv + p.other)


@pytest.mark.slow
def test_deepseek_v2_lite_is_15_7_b_with_2_4_b_active(facts):
    """Routed experts count top-k (6) of 64; DeepSeek's "2.4 B activated" leaves the
    embedding table out (a token reads one row of it) and keeps the head."""
    p = facts["DeepSeek-V2-Lite"].parameters
    assert round(p.total / 1e9, 1) == 15.7
    assert p.active == p.total - p.experts + p.experts * 6 // 64 == 2_661_150_208
    assert p.active_non_embedding == 2_451_435_008 and 2.4e9 <= p.active_non_embedding < 2.5e9


@pytest.mark.slow
def test_deepseek_v2_lite_structure(facts):
    f = facts["DeepSeek-V2-Lite"]
    assert f.layers.count == 27 and f.layers.mlp == ("dense",) + ("moe",) * 26  # first_k_dense_replace = 1
    assert f.moe == meta_facts.Moe(routed_experts=64, top_k=6, shared_experts=2, moe_layers=26,
                                   expert_intermediate=1408)
    a = f.attention
    assert (a.kind, a.heads, a.kv_lora_rank, a.q_lora_rank, a.qk_rope_head_dim, a.qk_nope_head_dim, a.head_dim,
            a.v_head_dim) == ("mla", 16, 512, None, 64, 128, 192, 128)
    # transformers' cache keeps the compressed latent and the rope key, not per-head K and V
    assert f.kv_cache.stores == "latent and rope key"
    assert f.kv_cache.per_layer == (512 + 64,) * 27 and f.kv_cache.elements_per_token == 27 * 576
    assert f.parameters.router == 26 * 64 * 2048 and not f.parameters.tied_embeddings
    assert any("auto_map ignored" in n for n in f.notes)


@pytest.mark.slow
def test_gemma2_alternates_sliding_and_global_layers_and_ties_its_head(facts):
    f = facts["gemma-2-9b"]
    assert f.layers.attention == ("sliding", "full") * 21
    assert f.attention.kind == "gqa" and f.attention.sliding_window == 4096 and f.kv_cache.window == 4096
    assert f.parameters.tied_embeddings and f.parameters.lm_head == 0
    assert f.parameters.embeddings == 256000 * 3584
    assert f.kv_cache.elements_per_token == 42 * 2 * 8 * 256


@pytest.mark.slow
@pytest.mark.parametrize("name,kind,kv_heads,head_dim", [
    ("Meta-Llama-3-8B", "gqa", 8, 128), ("Qwen2.5-7B", "gqa", 4, 128), ("Phi-3-mini-4k-instruct", "mha", 32, 96)])
def test_attention_kind_and_kv_cache(facts, name, kind, kv_heads, head_dim):
    f = facts[name]
    assert (f.attention.kind, f.attention.kv_heads, f.attention.head_dim) == (kind, kv_heads, head_dim)
    assert f.kv_cache.elements_per_token == f.layers.count * 2 * kv_heads * head_dim
    assert f.moe is None and f.parameters.active == f.parameters.total


@pytest.mark.slow
def test_sdxl_base_components(facts):
    f = facts["sdxl"]
    assert {c.name: c.parameters.total for c in f.components} == SDXL_EXACT
    assert {c.name: c.class_name for c in f.components} == {
        "text_encoder": "CLIPTextModel", "text_encoder_2": "CLIPTextModelWithProjection",
        "unet": "UNet2DConditionModel", "vae": "AutoencoderKL"}
    assert f.parameters.total == sum(SDXL_EXACT.values()) == 3_468_837_867
    assert f.class_name == "StableDiffusionXLPipeline" and f.flops is None


@pytest.mark.slow
@pytest.mark.parametrize("name", ["Meta-Llama-3-8B", "gemma-2-9b"])
def test_flops_are_what_torch_counts_on_the_meta_device(facts, name):
    """torch's FLOP counter over a forward pass of T tokens on the meta device counts T x
    ``per_token`` and the score/context products of T positions for each of T tokens."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    f = facts[name].flops
    cfg = transformers.AutoConfig.for_model(**json.loads((CONFIGS / f"{name}.json").read_text()))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    tokens = 16  # under any window: every layer sees them all
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"))
    coefficient = f.attention_per_position + f.sliding_attention_per_position
    assert counter.get_total_flops() == tokens * f.per_token + tokens * tokens * coefficient


def test_validate_side_imports_no_torch():
    code = ("import sys; import accelctl.models.meta_facts; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'diffusers')))")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0 and cp.stdout.strip() == "[]", cp.stderr


def test_without_torch_the_error_names_the_extra():
    """A module set to None in sys.modules is one Python will not import: as without torch."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from accelctl.models import meta_facts\n"
            f"try:\n    meta_facts.facts({str(CONFIGS / 'Qwen2.5-7B.json')!r})\n"
            "except meta_facts.Unavailable as exc:\n    print(exc, meta_facts.runs)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "needs torch: pip install 'accelctl[run]' 0" in cp.stdout, cp.stdout + cp.stderr


def test_tiny_facts_hold_together(tiny):
    """The two-layer llama as the subprocess answers it: every part of the answer is there."""
    assert tiny.parameters.total == 2 * 500 * 64 + 2 * (64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64
    assert tiny.layers.attention == ("full", "full") and tiny.kv_cache.elements_per_token == 2 * 2 * 2 * 16
    assert tiny.flops.per_token == 2 * (tiny.parameters.total - 500 * 64 - tiny.parameters.norms)


def test_the_environment_name_is_registered():
    from accelctl.contract import envnames

    assert envnames.MODEL_FACTS_CACHE == meta_facts.ENV


# ------------------------------------------------------------------------------- the cache


def _kept(tiny, tmp_path: Path) -> tuple[Path, str]:
    """A private cache folder holding ``TINY``'s entry, and its key."""
    where = tmp_path / "cache"
    key = meta_facts.key(meta_facts.request_of(TINY))
    meta_facts.store(where, key, tiny)
    return where, key


def test_an_entry_is_reused_without_a_subprocess(tiny, tmp_path, monkeypatch):
    where, key = _kept(tiny, tmp_path)
    monkeypatch.setenv(meta_facts.ENV, str(where))
    entry = meta_facts.entry_path(where, key)
    assert (os.stat(where).st_mode & 0o777, os.stat(entry).st_mode & 0o777) == (0o700, 0o600)
    before = meta_facts.runs
    assert meta_facts.facts(TINY) == tiny
    assert meta_facts.runs == before
    assert json.loads(entry.read_text())["format"] == meta_facts.FORMAT  # plain JSON


def test_the_key_is_the_canonical_config():
    cfg = json.loads((CONFIGS / "Qwen2.5-7B.json").read_text())
    reordered = dict(reversed(list(cfg.items())))
    assert meta_facts.key(meta_facts.request_of(cfg)) == meta_facts.key(meta_facts.request_of(reordered))
    assert meta_facts.key(meta_facts.request_of({**cfg, "num_hidden_layers": 27})) != \
        meta_facts.key(meta_facts.request_of(cfg))


def _tampered(text: str) -> dict[str, str]:
    good = json.loads(text)

    def changed(**parameters) -> str:
        out = json.loads(text)
        out["facts"]["parameters"].update(parameters)
        return json.dumps(out)

    return {
        "a count of the wrong type": changed(total=str(good["facts"]["parameters"]["total"])),
        "a float count": changed(norms=1.5),
        "a negative count": changed(other=-1, mlp=good["facts"]["parameters"]["mlp"] + 1),
        "NaN": text.replace('"norms": ', '"norms": NaN, "x": '),
        "parts that do not add up": changed(total=good["facts"]["parameters"]["total"] + 1),
        "truncated": text[: len(text) // 2],
        "another key": text.replace(good["key"], "0" * 64),
        "an unknown field": json.dumps({**good, "facts": {**good["facts"], "extra": 1}}),
        "not an object": "[]",
    }


def test_a_tampered_entry_is_not_trusted(tiny, tmp_path):
    where, key = _kept(tiny, tmp_path)
    entry = meta_facts.entry_path(where, key)
    text = entry.read_text()
    assert meta_facts.load(where, key) == tiny
    for what, bad in _tampered(text).items():
        entry.write_text(bad)
        assert meta_facts.load(where, key) is None, what
    entry.write_text(text)
    entry.chmod(0o660)  # others could have written it
    assert meta_facts.load(where, key) is None
    entry.unlink()
    good = tmp_path / "elsewhere.json"
    good.write_text(text)
    good.chmod(0o600)
    entry.symlink_to(good)  # a link is never followed
    assert meta_facts.load(where, key) is None


def test_a_folder_others_can_write_is_not_used(tiny, tmp_path, capsys):
    where, key = _kept(tiny, tmp_path)
    where.chmod(0o770)
    assert meta_facts.load(where, key) is None
    assert "model-facts cache not used" in capsys.readouterr().err


def test_off_keeps_nothing(monkeypatch):
    monkeypatch.setenv(meta_facts.ENV, "off")
    assert meta_facts.folder() is None
    monkeypatch.delenv(meta_facts.ENV)
    assert meta_facts.folder().name == "model-facts"


# ------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("config,said", [
    ({"model_type": "nonesuch", "hidden_size": 8}, "model_type 'nonesuch' is not one transformers"),
    ({"model_type": "my_model", "auto_map": {"AutoConfig": "configuration_my.MyConfig"}}, "remote code"),
    ({"hidden_size": 8}, "no model_type"),
    ({"model_type": "llama", "num_hidden_layers": 10**9, "hidden_size": 64, "num_attention_heads": 4},
     "num_hidden_layers = 1000000000: larger than any model"),
    ({"model_type": "llama", "vocab_size": 2**40, "hidden_size": 2**30}, "vocab_size = 1099511627776"),
    ({"model_type": "llama", "num_hidden_layers": -3}, "num_hidden_layers = -3: a size cannot be negative"),
])
def test_a_hostile_config_is_refused_in_the_builder(config, said):
    """The subprocess's own refusals, asked in this process (the libraries are imported here)."""
    pytest.importorskip("transformers")
    from accelctl.models import module_facts

    reply = module_facts._one({"config": config})
    assert reply["ok"] is False and said in reply["error"]


def test_a_pipeline_names_only_diffusers_and_transformers_classes(tmp_path):
    folder = tmp_path / "pipe"
    shutil.copytree(SDXL, folder)
    index = json.loads((folder / "model_index.json").read_text())
    index["unet"] = ["evil_lib", "UNet"]
    (folder / "model_index.json").write_text(json.dumps(index))
    with pytest.raises(meta_facts.FactsError, match="evil_lib.UNet: only diffusers and transformers"):
        meta_facts.request_of(folder)
    pytest.importorskip("diffusers")
    from accelctl.models import module_facts

    reply = module_facts._one({"pipeline": {"vae": ["diffusers", "DDPMScheduler"]}, "configs": {"vae": {}}})
    assert reply == {"ok": False, "error": "'DDPMScheduler' is not a diffusers model class", "refused": True}


@pytest.mark.parametrize("text", ["[1, 2]", "\"llama\"", "{not json"])
def test_a_config_file_that_is_not_an_object_is_refused_before_any_subprocess(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text)
    before = meta_facts.runs
    with pytest.raises(meta_facts.FactsError, match="config.json: not"):
        meta_facts.facts(path)
    assert meta_facts.runs == before
    with pytest.raises(meta_facts.FactsError):
        meta_facts.facts(42)


def _left_running(mark: str) -> list[int]:
    """Processes still carrying ``mark`` in their environment."""
    import psutil

    left = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("ACCELCTL_TEST_MARK") == mark:
                left.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return left


@pytest.mark.slow
def test_refusals_through_the_subprocess_leave_nothing_running(monkeypatch, tmp_path):
    """An unknown model_type, a bound the libraries' import cannot fit in, and a timeout: each a
    clear error, no process of the subprocess's group left, and only the config's own refusal
    cached."""
    pytest.importorskip("transformers")
    mark = uuid.uuid4().hex
    monkeypatch.setenv("ACCELCTL_TEST_MARK", mark)
    monkeypatch.setenv(meta_facts.ENV, str(tmp_path / "cache"))
    with pytest.raises(meta_facts.FactsError, match="'nonesuch' is not one transformers"):
        meta_facts.facts({"model_type": "nonesuch"})
    monkeypatch.setattr(meta_facts, "MEMORY_BYTES", 256 * 2**20)
    with pytest.raises(meta_facts.FactsError, match="memory bound is 256 MiB"):
        meta_facts.facts({"model_type": "llama"})
    monkeypatch.setattr(meta_facts, "MEMORY_BYTES", 16 * 2**30)
    monkeypatch.setattr(meta_facts, "TIMEOUT_S", 1)
    with pytest.raises(meta_facts.FactsError, match="took over 1 s; it was stopped"):
        meta_facts.facts({"model_type": "llama"})
    assert _left_running(mark) == []
    # the config's own refusal is kept (asking again starts no process); a run cut short by its
    # bounds says nothing of the config, so it leaves no entry
    (entry,) = (tmp_path / "cache").glob("*.json")
    assert "nonesuch" in entry.read_text() and '"refused"' in entry.read_text()


def test_a_mixture_on_the_meta_device():
    """A two-layer Mixtral (its expert banks take 16-bit matrices only: the cache is probed in
    bf16): two of eight experts active, the router and the cache read."""
    pytest.importorskip("transformers")
    from accelctl.models import module_facts

    cfg = {"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "num_local_experts": 8,
           "num_experts_per_tok": 2}
    f = meta_facts.checked(json.loads(json.dumps(module_facts.answer({"config": cfg}))))
    assert f.moe == meta_facts.Moe(routed_experts=8, top_k=2, shared_experts=0, moe_layers=2, expert_intermediate=128)
    assert f.parameters.experts == 2 * 8 * 3 * 64 * 128 and f.parameters.router == 2 * 8 * 64
    assert f.parameters.total - f.parameters.active == 2 * 6 * 3 * 64 * 128
    assert f.layers.mlp == ("moe", "moe") and f.kv_cache.per_layer == (2 * 2 * 16,) * 2

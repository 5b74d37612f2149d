"""The real shape of a model named by Hub id or path (``accelctl.language.check_shape``): from
``shape = ...`` beside the id, from config.json (a path, a local model folder, the HF cache,
the Hub only when asked and never for long), and accelerator targets refused at the model
line where none gives it."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import pytest

from accelctl import api
from accelctl.dsl.parser import parse
from accelctl.errors import PlanError
from accelctl.models import hf_config
from accelctl.language.check import check_all

ROOT = Path(__file__).resolve().parents[2]
LLAMA2 = ROOT / "workloads/configs/Llama-2-7b-hf.json"
MIXTRAL = ROOT / "workloads/configs/Mixtral-8x7B-v0.1.json"


def _check(text: str, tmp_path: Path):
    path = tmp_path / "w.wl"
    path.write_text(text, encoding="utf-8")
    specs, diags = check_all(parse(text, str(path)))
    return specs, diags


def _workload(model: str, targets: str = "target g { device = h100 }\n  target c { device = cpu  precision = fp32 }") -> str:
    return f"workload w {{\n  task finetune {{ }}\n  {model}\n  precision bf16\n  {targets}\n}}\n"


def test_shape_written_beside_the_hub_id_is_the_real_shape(tmp_path):
    model = ('model hf("meta-llama/Llama-2-7b-hf") { family = llama  shape = llama(layers = 32, hidden = 4096, '
             'heads = 32, kv_heads = 32, ffn = 11008, vocab = 32000) }')
    specs, diags = _check(_workload(model), tmp_path)
    assert [d.code for d in diags] == []
    m = specs[0].model
    assert (m.source, m.ref, m.family) == ("hf", "meta-llama/Llama-2-7b-hf", "llama")
    assert m.real_shape["layers"] == 32 and m.real_shape["ffn"] == 11008 and m.real_shape["tied"] is False
    assert m.stand_in["hidden"] == 64  # the stand-in stays tiny


def test_config_path_gives_the_shape_and_plans_use_it(tmp_path):
    shutil.copy(LLAMA2, tmp_path / "llama.json")
    specs, diags = _check(_workload('model hf("meta-llama/Llama-2-7b-hf") { config = "llama.json" }'), tmp_path)
    assert [d.code for d in diags] == []
    spec = specs[0]
    assert spec.model.family == "llama" and spec.model.real_shape["hidden"] == 4096
    # 6.74 B parameters x 2 bytes (bf16) on one device: the real model, not the stand-in, so
    # a full fine-tune with Adam does not fit one H100 (the stand-in's 2.4 GB "fit" before)
    with pytest.raises(PlanError) as refused:
        api.plan(spec, "g")
    (d,) = refused.value.diagnostics
    assert d.code == "E530" and "memory per device (real model): weights 13.48 GB + gradients 13.48 GB" in d.message


def test_local_model_folder_and_hf_cache_layout(tmp_path, monkeypatch):
    folder = tmp_path / "models/mixtral"
    folder.mkdir(parents=True)
    shutil.copy(MIXTRAL, folder / "config.json")
    specs, diags = _check(_workload('model local("models/mixtral")'), tmp_path)
    assert [d.code for d in diags] == [] and specs[0].model.family == "mixtral"
    assert specs[0].model.real_shape["experts"] == 8

    # huggingface_hub's cache layout: models--OWNER--NAME/{refs/main, snapshots/<commit>/config.json}
    cache = tmp_path / "hf-cache"
    repo = cache / "models--mistralai--Mixtral-8x7B-v0.1"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs/main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(MIXTRAL, repo / "snapshots" / commit / "config.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    specs, diags = _check(_workload('model hf("mistralai/Mixtral-8x7B-v0.1")'), tmp_path)
    assert [d.code for d in diags] == [] and specs[0].model.real_shape["experts_per_token"] == 2


def test_unshaped_hub_model_refuses_accelerator_targets_at_the_model_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    text = _workload('model hf("someone/llama-13b") { family = llama }',
                     "target g { device = h100 }\n  target gaudi { device = gaudi2 }\n  target c { device = cpu  precision = fp32 }")
    specs, diags = _check(text, tmp_path)
    assert [(d.code, d.span.line, d.span.column) for d in diags] == [("E425", 3, 9), ("E425", 3, 9)]
    assert "target g (h100)" in diags[0].message and "target gaudi (gaudi2)" in diags[1].message
    # cpu targets alone still run the stand-in
    specs, diags = _check(_workload('model hf("someone/llama-13b") { family = llama }',
                                    "target c { device = cpu  precision = fp32 }"), tmp_path)
    assert diags == [] and specs[0].model.real_shape == {}


def test_config_of_another_family_than_written_is_e409(tmp_path):
    shutil.copy(LLAMA2, tmp_path / "llama.json")
    _, diags = _check(_workload('model hf("x/y") { family = mistral  config = "llama.json" }'), tmp_path)
    assert [d.code for d in diags] == ["E409"]


def test_broken_config_is_a_positioned_error(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "short.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    for name in ("bad.json", "short.json"):
        _, diags = _check(_workload(f'model hf("x/y") {{ family = llama  config = "{name}" }}'), tmp_path)
        assert [d.code for d in diags] == ["E425", "E426"], [d.render() for d in diags]
        assert (diags[1].span.line, diags[1].span.column) == (3, 37)  # at config = "..."


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hub_online_fails_fast_and_is_reported(tmp_path, monkeypatch):
    """No network here (and none asked for): the Hub's host cannot be reached, so the fetch
    fails at once instead of huggingface_hub's ~23 s of retries."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    start = time.monotonic()
    _, diags = _check(_workload('model hf("someone/llama-13b") { family = llama  hub = online }'), tmp_path)
    assert time.monotonic() - start < 5
    assert [(d.code, d.severity) for d in diags] == [("W426", "warning"), ("E425", "error")]
    assert "could not be fetched" in diags[0].message and "cannot be reached" in diags[0].hint
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, diags = _check(_workload('model hf("someone/llama-13b") { family = llama  hub = online }'), tmp_path)
    assert [d.code for d in diags] == ["W426", "E425"] and "HF_HUB_OFFLINE" in diags[0].hint


def test_an_online_fetch_that_hangs_is_cut_at_the_timeout(monkeypatch):
    """A host that accepts the connection and never answers: the fetch is given
    ``HUB_TIMEOUT_S`` and reported."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(hf_config, "HUB_TIMEOUT_S", 1)
        start = time.monotonic()
        with pytest.raises(hf_config.ConfigError, match="took over 1 s|failed"):
            hf_config.find("someone/never-answers", "hf", Path("."), online=True)
        assert time.monotonic() - start < 4


def test_stand_in_keeps_the_real_structure(tmp_path):
    shutil.copy(MIXTRAL, tmp_path / "mixtral.json")
    specs, _ = _check(_workload('model hf("m/x") { config = "mixtral.json" }', "target c { device = cpu  precision = fp32 }"), tmp_path)
    s = specs[0].model.stand_in
    # 32 heads over 8 key/value heads -> 4 over 1; 8 experts, 2 per token -> 4, 2; untied
    assert (s["heads"], s["kv_heads"], s["experts"], s["experts_per_token"], s["tied"]) == (4, 1, 4, 2, False)
    assert s["hidden"] == 64 and s["layers"] == 2


def test_an_id_the_hub_would_refuse_is_simply_not_in_the_cache(tmp_path):
    """huggingface_hub's validator refuses 'bert-/arge-uncased' (a part ending with '-'), which
    accelctl's Hub-id pattern lets through (found by tests/dsl/test_fuzz.py): no traceback."""
    _, diags = _check(_workload('model hf("bert-/arge-uncased") { family = bert }'), tmp_path)
    assert [d.code for d in diags] == ["E425"]


def test_shape_keys_on_an_architecture_model_are_refused_not_ignored(tmp_path):
    _, diags = _check(_workload('model llama(layers = 2) { shape = llama(layers = 32)  config = "x.json" }'),
                      tmp_path)
    assert [(d.code, d.span.column) for d in diags] == [("E202", 29), ("E202", 57)]  # at shape, at config


def test_an_unusable_config_found_in_the_cache_leaves_cpu_targets_running(tmp_path, monkeypatch):
    """A config.json the workload did not name (here: the HF cache's, of a model_type without
    formulas) is a warning: cpu targets still run the stand-in; accelerator ones are E425."""
    cache = tmp_path / "hf-cache"
    snap = cache / "models--state-spaces--mamba-130m-hf" / "snapshots" / ("1" * 40)
    snap.mkdir(parents=True)
    (cache / "models--state-spaces--mamba-130m-hf" / "refs").mkdir()
    (cache / "models--state-spaces--mamba-130m-hf" / "refs" / "main").write_text("1" * 40)
    shutil.copy(ROOT / "tests/data/hf_configs_unsupported/mamba-130m.json", snap / "config.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    model = 'model hf("state-spaces/mamba-130m-hf") { family = llama }'
    specs, diags = _check(_workload(model, "target c { device = cpu  precision = fp32 }"), tmp_path)
    assert [(d.code, d.severity) for d in diags] == [("W426", "warning")] and "mamba" in diags[0].hint
    _, diags = _check(_workload(model), tmp_path)
    assert sorted(d.code for d in diags) == ["E425", "W426"]


def test_a_config_named_for_a_catalogued_model_wins_over_the_catalog(tmp_path):
    cfg = {"model_type": "bloom", "n_layer": 4, "hidden_size": 256, "n_head": 8, "vocab_size": 1000}
    (tmp_path / "small-bloom.json").write_text(json.dumps(cfg))
    specs, diags = _check(_workload('model hf("bigscience/bloomz-7b1") { config = "small-bloom.json" }'), tmp_path)
    assert diags == [] and specs[0].model.real_shape["layers"] == 4 and specs[0].model.params == 0.0

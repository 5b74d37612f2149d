"""A model's config.json is read in one place (``accelctl.models.hf_config.load``) for every verb:
a file or a value no model can have -- huge, negative, zero, not a whole number, sizes at odds
with each other, a file that is no regular file, not UTF-8, not JSON or nested past Python's
reader -- is the same words from ``init`` (its one-line refusal) and from ``validate``, ``plan``
and ``estimate`` (E426 at the model line), never a traceback (exit 70) and never "fits"."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelctl import api, exitcodes
from accelctl.cli import build_parser, main
from accelctl.errors import AccelctlError
from accelctl.models import hf_config

LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
         "intermediate_size": 11008, "vocab_size": 32000, "max_position_embeddings": 4096}
WORKLOAD = ('workload w {\n  task finetune\n  model local("m")\n  precision bf16\n'
            '  target g { device = h100 }\n  target c { device = cpu  precision = fp32 }\n}\n')


def _json(**changed) -> str:
    return json.dumps({**LLAMA, **changed})


def _raw(key: str, literal: str) -> str:
    """LLAMA with ``key`` set to a literal json.dumps would not write (NaN, 5,000 digits)."""
    return json.dumps({k: v for k, v in LLAMA.items() if k != key})[:-1] + f', "{key}": {literal}}}'


#: (id, config.json text, what every verb says of it)
VALUES = [
    ("hidden-4001-digits", _json(hidden_size=10**4000), "hidden_size = a number of 4001 digits is not a size"),
    ("hidden-past-pythons-digit-limit", _raw("hidden_size", "-" + "9" * 5000),
     "hidden_size = a number of 5000 digits is not a size"),
    ("hidden-not-divisible-by-heads", _json(hidden_size=4097),
     "hidden_size = 4097 is not divisible by num_attention_heads = 32"),
    ("more-kv-heads-than-heads", _json(num_key_value_heads=64),
     "num_key_value_heads = 64 is more than num_attention_heads = 32"),
    ("kv-heads-not-dividing-heads", _json(num_key_value_heads=12),
     "num_attention_heads = 32 is not a multiple of num_key_value_heads = 12"),
    ("negative-ffn", _json(intermediate_size=-11008), "intermediate_size = -11008 is not a size"),
    ("zero-layers", _json(num_hidden_layers=0), "num_hidden_layers = 0 is not a size"),
    ("huge-vocab", _json(vocab_size=10**11), "vocab_size = 100000000000 is not a size"),
    ("float-size", _json(hidden_size=4096.0), "hidden_size = 4096.0 is not a size"),
    ("nan-size", _raw("hidden_size", "NaN"), "hidden_size = NaN is not a size"),
    ("infinite-size", _raw("num_hidden_layers", "Infinity"), "num_hidden_layers = Infinity is not a size"),
    ("boolean-size", _json(num_hidden_layers=True), "num_hidden_layers = true is not a size"),
    ("string-size", _json(vocab_size="32000"), 'vocab_size = "32000" is not a size'),
    ("list-size", _json(hidden_size=[4096]), "hidden_size = a list of 1 is not a size"),
    ("negative-head-dim", _json(head_dim=-128), "head_dim = -128 is not a size"),
    ("string-flag", _json(tie_word_embeddings="false"), 'tie_word_embeddings = "false" is not true or false'),
    ("size-missing", _json(hidden_size=None), "no hidden_size"),
    ("experts-per-token-past-experts",
     _json(model_type="mixtral", num_local_experts=2, num_experts_per_tok=4),
     "num_experts_per_tok = 4 is more than num_local_experts = 2"),
    ("not-an-object", "[1, 2, 3]", "holds a list of 3, not a JSON object"),
    ("nested-50000-deep", "[" * 50_000 + "]" * 50_000, "nested too deep"),
    ("not-json", "{\"model_type\": ", "not JSON (Expecting value at line 1, column 16)"),
]


def _folder(tmp_path: Path, text: str | bytes) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    cfg = folder / "config.json"
    cfg.write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def _said_by_every_verb(tmp_path: Path, folder: Path, words: str) -> None:
    """load's message holds ``words``; validate says exactly it at the model line (E426) and
    init refuses in the same words, writing nothing."""
    with pytest.raises(hf_config.ConfigError) as read:
        hf_config.load(folder / "config.json")
    message = str(read.value)
    assert message.startswith(f"{folder / 'config.json'}: ") and words in message, message
    assert "\n" not in message and len(message) < 300
    wl = tmp_path / "w.wl"
    wl.write_text(WORKLOAD)
    _, diags = api.validate(wl)
    assert [(d.code, d.span.line, d.span.column, d.message) for d in diags] == [("E426", 3, 9, message)]
    out = tmp_path / "init.wl"
    args = build_parser().parse_args(["init", str(folder), "-o", str(out)])
    with pytest.raises(AccelctlError) as refused:
        args.fn(args)
    assert refused.value.exit_code == exitcodes.USAGE and str(refused.value) == f"init: {message}"
    assert not out.exists()


@pytest.mark.parametrize("text,words", [v[1:] for v in VALUES], ids=[v[0] for v in VALUES])
def test_a_value_no_model_has_is_one_diagnostic_for_every_verb(tmp_path, text, words):
    _said_by_every_verb(tmp_path, _folder(tmp_path, text), words)


def _fifo(cfg: Path) -> None:
    os.mkfifo(cfg)


def _to_dev_zero(cfg: Path) -> None:
    cfg.symlink_to("/dev/zero")


def _dangling(cfg: Path) -> None:
    cfg.symlink_to(cfg.parent / "gone.json")


def _folder_named_config(cfg: Path) -> None:
    cfg.mkdir()


def _sparse_5_mib(cfg: Path) -> None:
    with open(cfg, "wb") as f:
        f.truncate(hf_config.MAX_BYTES + 1)


def _latin1(cfg: Path) -> None:
    cfg.write_bytes(json.dumps({**LLAMA, "name": "café"}, ensure_ascii=False).encode("latin-1"))


KINDS = [(_fifo, "not a regular file"), (_to_dev_zero, "not a regular file"),
         (_folder_named_config, "not a regular file"), (_dangling, "cannot be read (No such file or directory)"),
         (_sparse_5_mib, "over 4 MiB"), (_latin1, "not UTF-8 text (byte 0xe9")]


@pytest.mark.parametrize("make,words", KINDS, ids=[k[0].__name__.strip("_") for k in KINDS])
def test_a_config_json_that_is_no_readable_file_is_said_not_waited_on(tmp_path, make, words):
    folder = tmp_path / "m"
    folder.mkdir()
    make(folder / "config.json")
    _said_by_every_verb(tmp_path, folder, words)


@pytest.mark.parametrize("verb", ["validate", "plan", "estimate"])
def test_plan_and_estimate_refuse_it_too_never_fits(tmp_path, capsys, verb):
    folder = _folder(tmp_path, _json(hidden_size=4097))
    wl = tmp_path / "w.wl"
    wl.write_text(WORKLOAD)
    assert main([verb, str(wl)]) == exitcodes.FAILED
    out, err = capsys.readouterr()
    assert f"error[E426]: {folder / 'config.json'}: hidden_size = 4097 is not divisible" in out + err
    assert "fits" not in out and "Traceback" not in err


def test_a_broken_config_in_the_hf_cache_is_an_error_an_unknown_model_type_a_warning(tmp_path, monkeypatch):
    """A config.json found on its own is read the same way: broken, it is E426 (the run would
    load it too); sound but of a model_type without formulas whose class cannot be read either, W426 (the shape is
    unknown)."""
    cache = tmp_path / "hf-cache"
    repo = cache / "models--someone--llama-x"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs/main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
    cfg = repo / "snapshots" / ("0" * 40) / "config.json"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    wl = tmp_path / "w.wl"
    wl.write_text('workload w {\n  task finetune\n  model hf("someone/llama-x") { family = llama }\n'
                  '  target c { device = cpu  precision = fp32 }\n}\n')
    # mamba: transformers' class has no attention layers to read (the facts of this file are
    # read once a session, shared with the other tests of it)
    mamba = (Path(__file__).resolve().parents[1] / "data/hf_configs_unsupported/mamba-130m.json").read_text()
    for text, found in ((_json(num_key_value_heads=64), ("E426", "error")), (mamba, ("W426", "warning"))):
        cfg.write_text(text)
        _, diags = api.validate(wl)
        assert [(d.code, d.severity) for d in diags] == [found], [d.render() for d in diags]

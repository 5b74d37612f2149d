"""A model's real shape from its own ``config.json``, read without transformers or torch.

Where the file comes from (``find``), in order:

1. ``config = "path"`` in the model block: a config.json, or a folder holding one (relative
   to the workload file);
2. ``model local("path")``: ``path/config.json``;
3. ``model hf("id")``: the Hugging Face cache (huggingface_hub's layout, ``HF_HUB_CACHE`` /
   ``HF_HOME``), never the network;
4. ``model hf("id") { hub = online }``: only then the Hub, ``hf_hub_download`` of
   config.json alone (no weights), bounded by ``HUB_TIMEOUT_S`` and skipped when
   ``HF_HUB_OFFLINE`` is set; a failure is reported, not waited on.

``shape_of`` turns the file's keys into accelctl's shape keys (``accelctl.spec.models``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: seconds an online fetch of config.json may take (connect and read), then it is reported
HUB_TIMEOUT_S = 10

#: config.json ``model_type`` -> accelctl family
FAMILY_OF = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "gemma": "gemma", "mixtral": "mixtral",
             "gpt_neox": "gpt_neox", "falcon": "falcon", "RefinedWeb": "falcon", "RefinedWebModel": "falcon",
             "bloom": "bloom", "gpt2": "gpt2", "bert": "bert", "t5": "t5"}


class ConfigError(ValueError):
    """config.json could not be had or read: the message says which and why."""


def find(ref: str, source: str, base: Path, written: str = "", online: bool = False) -> Path | None:
    """The config.json to read, or None where there is none to be had without the network."""
    if written:
        p = (base / written).expanduser()
        p = p / "config.json" if p.is_dir() else p
        if not p.is_file():
            raise ConfigError(f"config = {written!r}: no such file (relative to the workload file)")
        return p
    if source == "local":
        p = (base / ref).expanduser() / "config.json"
        return p if p.is_file() else None
    cached = _from_cache(ref)
    if cached is not None or not online:
        return cached
    return _from_hub(ref)


def _from_cache(ref: str) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    cache = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None)
    try:
        got = try_to_load_from_cache(ref, "config.json", cache_dir=cache)
    except ValueError:  # an id the Hub would refuse ("bert-/x": a part ends with '-'): never in the cache
        return None
    return Path(got) if isinstance(got, str) else None


def _from_hub(ref: str) -> Path:
    """config.json from the Hub, in a daemon thread given ``HUB_TIMEOUT_S``: huggingface_hub
    retries a failed request with backoff (~23 s with no network), which validate must not wait
    for; its retry messages are kept off the terminal meanwhile."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "on", "yes", "true"):
        raise ConfigError("hub = online, but HF_HUB_OFFLINE is set in this environment")
    _probe(ref)
    import logging
    import threading

    from huggingface_hub import hf_hub_download

    out: dict[str, Any] = {}

    def fetch() -> None:
        try:
            out["path"] = Path(hf_hub_download(ref, "config.json", etag_timeout=HUB_TIMEOUT_S,
                                               endpoint=os.environ.get("HF_ENDPOINT") or None))
        except Exception as exc:  # noqa: BLE001 - every failure (network, 401, 404) is reported the same way
            out["error"] = exc

    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.CRITICAL)
    worker = threading.Thread(target=fetch, name="accelctl-config-fetch", daemon=True)
    try:
        worker.start()
        worker.join(HUB_TIMEOUT_S)
    finally:
        if not worker.is_alive():  # else its retries would still print, after the report
            hub_log.setLevel(level)
    if "path" in out:
        return out["path"]
    exc = out.get("error")
    if exc is None:
        raise ConfigError(f"fetching config.json of {ref} from the Hub took over {HUB_TIMEOUT_S} s")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    raise ConfigError(f"fetching config.json of {ref} from the Hub failed: {type(exc).__name__}: {first}")


def _probe(ref: str) -> None:
    """Fail at once where the Hub's host cannot even be reached (no network here: DNS fails in
    milliseconds, then huggingface_hub would retry for ~23 s).  Skipped behind a proxy."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=min(3, HUB_TIMEOUT_S)).close()
    except OSError as exc:
        raise ConfigError(f"fetching config.json of {ref} from the Hub failed: {url.hostname}:{port} cannot be reached "
                          f"({exc})") from exc


def read(path: Path) -> dict[str, Any]:
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not a readable JSON file: {exc}") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} holds no JSON object")
    return cfg


def _int(cfg: dict[str, Any], *keys: str, default: int | None = None) -> int:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    if default is None:
        raise ConfigError(f"config.json has no positive whole {keys[0]}")
    return default


def shape_of(cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(family, shape keys) of a parsed config.json."""
    mtype = cfg.get("model_type")
    family = FAMILY_OF.get(mtype) if isinstance(mtype, str) else None
    if family is None:
        raise ConfigError(f"config.json's model_type {mtype!r} is not one accelctl has formulas for "
                          f"({', '.join(sorted(set(FAMILY_OF.values())))})")
    if family in ("bloom", "gpt2", "bert", "t5"):
        return family, _classic(family, cfg)
    h = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads", "n_head")
    s: dict[str, Any] = {"layers": _int(cfg, "num_hidden_layers", "n_layer"), "hidden": h, "heads": heads,
                         "vocab": _int(cfg, "vocab_size"),
                         "max_positions": _int(cfg, "max_position_embeddings", default=2048)}
    if family == "falcon":
        if cfg.get("new_decoder_architecture"):
            kv = _int(cfg, "num_kv_heads", default=heads)
        else:
            kv = 1 if cfg.get("multi_query", True) else heads
        s.update(kv_heads=kv, ffn=_int(cfg, "ffn_hidden_size", default=4 * h),
                 new_arch=bool(cfg.get("new_decoder_architecture", False)),
                 parallel_attn=bool(cfg.get("parallel_attn", True)), bias=bool(cfg.get("bias", False)),
                 tied=bool(cfg.get("tie_word_embeddings", True)))
        return family, s
    s["ffn"] = _int(cfg, "intermediate_size")
    if family == "gpt_neox":
        s["tied"] = bool(cfg.get("tie_word_embeddings", False))
        return family, s
    s["kv_heads"] = _int(cfg, "num_key_value_heads", default=heads)
    head_dim = cfg.get("head_dim")
    if isinstance(head_dim, int) and head_dim > 0 and head_dim != h // heads:
        s["head_dim"] = head_dim
    s["tied"] = bool(cfg.get("tie_word_embeddings", family == "gemma"))
    if family == "llama" and cfg.get("attention_bias"):
        s["attn_bias"] = True
    if family == "mixtral":
        s.update(experts=_int(cfg, "num_local_experts"), experts_per_token=_int(cfg, "num_experts_per_tok"))
    return family, s


def _classic(family: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """The families accelctl knew before config.json: their existing shape keys."""
    if family == "bloom":
        return {"layers": _int(cfg, "n_layer", "num_hidden_layers"), "hidden": _int(cfg, "hidden_size", "n_embed"),
                "heads": _int(cfg, "n_head", "num_attention_heads"), "vocab": _int(cfg, "vocab_size")}
    if family == "gpt2":
        h = _int(cfg, "n_embd")
        return {"layers": _int(cfg, "n_layer"), "hidden": h, "heads": _int(cfg, "n_head"),
                "vocab": _int(cfg, "vocab_size"), "max_positions": _int(cfg, "n_positions", default=1024)}
    if family == "bert":
        return {"layers": _int(cfg, "num_hidden_layers"), "hidden": _int(cfg, "hidden_size"),
                "heads": _int(cfg, "num_attention_heads"), "ffn": _int(cfg, "intermediate_size"),
                "vocab": _int(cfg, "vocab_size"), "max_positions": _int(cfg, "max_position_embeddings", default=512)}
    return {"layers": _int(cfg, "num_layers"), "hidden": _int(cfg, "d_model"), "heads": _int(cfg, "num_heads"),
            "ffn": _int(cfg, "d_ff"), "kv": _int(cfg, "d_kv"), "vocab": _int(cfg, "vocab_size")}

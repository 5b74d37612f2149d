"""A model's real shape from its own ``config.json``, read without transformers or torch.

Where the file comes from (``find``), in order: the model block's ``config = "path"``;
``model local("path")``'s folder; for ``model hf("id")`` the Hugging Face cache, never the
network; only with ``hub = online`` the Hub (config.json alone, bounded by ``HUB_TIMEOUT_S``,
skipped under ``HF_HUB_OFFLINE``).  ``load`` reads it (``read``: a regular UTF-8 JSON file of at
most ``MAX_BYTES``) into accelctl's shape keys (``shape_of``), each value and the sizes checked:
the one way validate, plan, estimate and init take a shape, so a bad file reads the same from each.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from accelctl.models.catalog import MAX_SIZE, shape_problems

#: seconds an online fetch of config.json may take (connect and read), then it is reported
HUB_TIMEOUT_S = 10

#: config.json ``model_type`` -> accelctl family
FAMILY_OF = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "gemma": "gemma", "mixtral": "mixtral",
             "gpt_neox": "gpt_neox", "falcon": "falcon", "RefinedWeb": "falcon", "RefinedWebModel": "falcon",
             "bloom": "bloom", "gpt2": "gpt2", "bert": "bert", "t5": "t5"}


class ConfigError(ValueError):
    """config.json could not be had or read: the message says which and why."""


class FetchFailed(ConfigError):
    """config.json could not be fetched from the Hub (no network, HF_HUB_OFFLINE, a timeout)."""


class UnknownModelType(ConfigError):
    """A sound config.json whose ``model_type`` accelctl has no formulas for: its shape is
    unknown here, though the model may still run with its own classes."""


def find(ref: str, source: str, base: Path, written: str = "", online: bool = False) -> Path | None:
    """The config.json to read, or None where there is none to be had without the network."""
    if written:
        p = (base / written).expanduser()
        p = p / "config.json" if p.is_dir() else p
        if not os.path.lexists(p):
            raise ConfigError(f"config = {written!r}: no such file (relative to the workload file)")
        return p
    if source == "local":
        p = (base / ref).expanduser() / "config.json"
        return p if os.path.lexists(p) else None
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
    """config.json from the Hub, in a daemon thread given ``HUB_TIMEOUT_S``: huggingface_hub retries
    a failed request with backoff, which validate must not wait for; its retry messages are kept off
    the terminal meanwhile.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "on", "yes", "true"):
        raise FetchFailed("hub = online, but HF_HUB_OFFLINE is set in this environment")
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
        raise FetchFailed(f"fetching config.json of {ref} from the Hub took over {HUB_TIMEOUT_S} s")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    raise FetchFailed(f"fetching config.json of {ref} from the Hub failed: {type(exc).__name__}: {first}")


def _probe(ref: str) -> None:
    """Fail at once where the Hub's host cannot even be reached (DNS fails fast; huggingface_hub
    would go on retrying).  Skipped behind a proxy.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=min(3, HUB_TIMEOUT_S)).close()
    except OSError as exc:
        raise FetchFailed(f"fetching config.json of {ref} from the Hub failed: {url.hostname}:{port} cannot be reached "
                          f"({exc})") from exc


#: the largest config.json read: a model's is a few KiB (a classifier's label names, some hundred)
MAX_BYTES = 4 * 2**20
#: integer literals past this many digits are kept as their length only (Python refuses to
#: convert past 4300, and no size has more than 8)
_MAX_DIGITS = 30


class _Huge:
    """An integer literal too long to be any size: its digit count, for the message."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))


def _parse_int(text: str) -> int | _Huge:
    return int(text) if len(text) <= _MAX_DIGITS else _Huge(text)


def read(path: Path) -> dict[str, Any]:
    """The JSON object of a config.json: a regular file (a link is followed; a FIFO or a
    device is never waited on), at most ``MAX_BYTES``, UTF-8 text, JSON of any depth Python's
    reader takes; ConfigError saying which it is not."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ConfigError(f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError("not a regular file (a folder, a FIFO or a device)")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"over {MAX_BYTES // 2**20} MiB: not a model's config.json")
    data = data.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark, as some editors write
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})") from None
    try:
        cfg = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise ConfigError("not JSON accelctl reads: arrays or objects nested too deep") from None
    except ValueError as exc:
        raise ConfigError(f"not JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"holds {_shown(cfg)}, not a JSON object")
    return cfg


def load(path: Path) -> tuple[str, dict[str, Any]]:
    """(family, shape) of the config.json at ``path``: ``read`` then ``shape_of``, the one way
    every verb (validate, plan, estimate, init) takes a model's shape from its file, so each
    says the same of a file it cannot use: ConfigError (UnknownModelType for a model_type
    without formulas), its message starting with the path."""
    try:
        return shape_of(read(path))
    except ConfigError as exc:
        raise type(exc)(f"{path}: {exc}") from None


def _shown(v: Any) -> str:
    """A value of config.json as JSON writes it, short (a key may hold a megabyte)."""
    if isinstance(v, _Huge):
        return f"a number of {v.digits} digits"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return f"a list of {len(v)}"
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."


class _Reader:
    """The values ``shape_of`` takes from one config.json, each checked as it is read (a
    whole number from 1 to ``MAX_SIZE``, true or false; null is absent), and the key each
    shape key came from, so ``shape_problems`` names config.json's own keys."""

    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.names: dict[str, str] = {}

    def size(self, shape_key: str, *keys: str, default: int | None = None) -> int:
        key = next((k for k in keys if self.cfg.get(k) is not None), None)
        self.names[shape_key] = key or keys[0]
        if key is None:
            if default is None:
                raise ConfigError(f"no {' or '.join(keys)}")
            return default
        v = self.cfg[key]
        if type(v) is not int or not 1 <= v <= MAX_SIZE:
            raise ConfigError(f"{key} = {_shown(v)} is not a size (a whole number from 1 to {MAX_SIZE:_})")
        return v

    def flag(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if type(v) is not bool:
            raise ConfigError(f"{key} = {_shown(v)} is not true or false")
        return v


def shape_of(cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(family, shape keys) of a parsed config.json, every value it takes checked, and the
    sizes checked against each other (``accelctl.models.catalog.shape_problems``)."""
    mtype = cfg.get("model_type")
    family = FAMILY_OF.get(mtype) if isinstance(mtype, str) else None
    if family is None:
        nested = " (a multimodal config: its text_config is not read alone)" if "text_config" in cfg else ""
        known = ", ".join(sorted(set(FAMILY_OF.values())))
        raise UnknownModelType((f"model_type = {_shown(mtype)} is not one accelctl has formulas for ({known})"
                                if mtype is not None else f"no model_type (accelctl has formulas for {known})")
                               + nested)
    r = _Reader(cfg)
    s = _classic(family, r) if family in ("bloom", "gpt2", "bert", "t5") else _decoder(family, r)
    problems = shape_problems(s, r.names)
    if problems:
        raise ConfigError(problems[0][0])
    return family, s


def _decoder(family: str, r: _Reader) -> dict[str, Any]:
    """The decoder-only families read from config.json: their shape keys (``accelctl.models.catalog``)."""
    h = r.size("hidden", "hidden_size")
    heads = r.size("heads", "num_attention_heads", "n_head")
    s: dict[str, Any] = {"layers": r.size("layers", "num_hidden_layers", "n_layer"), "hidden": h, "heads": heads,
                         "vocab": r.size("vocab", "vocab_size"),
                         "max_positions": r.size("max_positions", "max_position_embeddings", default=2048)}
    if family == "falcon":
        new_arch = r.flag("new_decoder_architecture", False)
        if new_arch:
            kv = r.size("kv_heads", "num_kv_heads", default=heads)
        else:
            kv = 1 if r.flag("multi_query", True) else heads
        s.update(kv_heads=kv, ffn=r.size("ffn", "ffn_hidden_size", default=4 * h), new_arch=new_arch,
                 parallel_attn=r.flag("parallel_attn", True), bias=r.flag("bias", False),
                 tied=r.flag("tie_word_embeddings", True))
        return s
    s["ffn"] = r.size("ffn", "intermediate_size")
    if family == "gpt_neox":
        s["tied"] = r.flag("tie_word_embeddings", False)
        return s
    s["kv_heads"] = r.size("kv_heads", "num_key_value_heads", default=heads)
    head_dim = r.size("head_dim", "head_dim", default=0)
    if head_dim and head_dim * heads != h:
        s["head_dim"] = head_dim
    s["tied"] = r.flag("tie_word_embeddings", family == "gemma")
    if family == "llama" and r.flag("attention_bias", False):
        s["attn_bias"] = True
    if family == "mixtral":
        s.update(experts=r.size("experts", "num_local_experts"),
                 experts_per_token=r.size("experts_per_token", "num_experts_per_tok"))
    return s


def _classic(family: str, r: _Reader) -> dict[str, Any]:
    """The families accelctl knew before config.json: their existing shape keys."""
    if family == "bloom":
        return {"layers": r.size("layers", "n_layer", "num_hidden_layers"),
                "hidden": r.size("hidden", "hidden_size", "n_embed"),
                "heads": r.size("heads", "n_head", "num_attention_heads"), "vocab": r.size("vocab", "vocab_size")}
    if family == "gpt2":
        return {"layers": r.size("layers", "n_layer"), "hidden": r.size("hidden", "n_embd"),
                "heads": r.size("heads", "n_head"), "vocab": r.size("vocab", "vocab_size"),
                "max_positions": r.size("max_positions", "n_positions", default=1024)}
    if family == "bert":
        return {"layers": r.size("layers", "num_hidden_layers"), "hidden": r.size("hidden", "hidden_size"),
                "heads": r.size("heads", "num_attention_heads"), "ffn": r.size("ffn", "intermediate_size"),
                "vocab": r.size("vocab", "vocab_size"),
                "max_positions": r.size("max_positions", "max_position_embeddings", default=512)}
    return {"layers": r.size("layers", "num_layers"), "hidden": r.size("hidden", "d_model"),
            "heads": r.size("heads", "num_heads"), "ffn": r.size("ffn", "d_ff"), "kv": r.size("kv", "d_kv"),
            "vocab": r.size("vocab", "vocab_size")}

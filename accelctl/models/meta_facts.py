"""A model's facts from its library's own module on the meta device, asked of a subprocess.

``facts(config)`` takes a config.json's contents (a dict), a config.json file, a model folder
holding one, or a diffusers pipeline folder (``model_index.json`` and each component's
``config.json``), and returns ``ModelFacts``: parameters by component, the layer stack,
attention, MoE routing, the KV cache and matmul FLOPs (what each is: docs/model-facts.md).

The module is built by ``python -m accelctl.models.module_facts`` in a process of its own
(this interpreter; JSON on stdin and stdout; ``TIMEOUT_S``; its own process group, ended
whole on a timeout; its address space bounded by ``MEMORY_BYTES``), so this module imports
neither torch nor transformers and validate stays light.  Every value of the answer is
checked (integers, at least 0, the parts adding up) before it is believed.

Answers are kept as plain JSON in ``model-facts/`` of ``hostinfo.cache_dir()`` (or
``$ACCELCTL_MODEL_FACTS_CACHE``; ``off``: none), one file per request, named by the sha256 of
the canonical request and the torch, transformers and diffusers versions.  A folder others
could write is not used (``private_files``); an entry that is not a regular file of this
user's that only they can write, or that does not read back as checked facts, is recomputed.
"""

from __future__ import annotations

import _thread
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Any, Literal, Sequence

import msgspec

from accelctl import private_files
from accelctl.frozen import Value
from accelctl.entrypoints import MODEL_FACTS
from accelctl.hostinfo import cache_dir

#: where to keep the answers instead (``off``: no cache); also in ``accelctl.contract.envnames``
ENV = "ACCELCTL_MODEL_FACTS_CACHE"
#: the cache, as its warning names it
WHAT = "the model-facts cache"
#: the layout of an entry; bump when ``ModelFacts`` changes
FORMAT = "accelctl-model-facts-2"
#: seconds the subprocess may take (the libraries' import is most of it), and more for each
#: further model of a batch
TIMEOUT_S = 60
PER_MODEL_S = 15
#: the subprocess's address space: the libraries take ~4 GiB of it; a meta build takes little more
MEMORY_BYTES = 16 * 2**30
#: the largest config.json, model_index.json or cache entry read
MAX_BYTES = 4 * 2**20
#: the extra that installs what the subprocess imports
EXTRA = "run"
#: the largest count believed (a stored field's bound, as the run store's)
MAX_COUNT = 2**63 - 1

Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)]
Name = Annotated[str, msgspec.Meta(max_length=200)]

#: subprocesses started by this process (a cache hit starts none)
runs = 0


class FactsError(ValueError):
    """The facts could not be had: the message says why (a refused config, a failed build)."""


class Unavailable(FactsError):
    """torch, transformers or diffusers is not installed here."""


class Parameters(Value):
    """Parameters by component; a tensor held under two names (a tied head) counted once."""

    total: Count
    #: the parameters one token goes through: routed experts scaled by top-k over their number
    active: Count
    embeddings: Count
    attention: Count
    mlp: Count
    experts: Count
    router: Count
    shared_experts: Count
    norms: Count
    lm_head: Count
    conv: Count
    other: Count
    tied_embeddings: bool

    @property
    def active_non_embedding(self) -> int:
        """``active`` without the embedding table (a token reads one row of it)."""
        return self.active - self.embeddings


class Layers(Value):
    """The decoder's stack, one entry a layer in ``attention`` and ``mlp``."""

    count: Count
    hidden: Count
    intermediate: Count | None
    attention: tuple[Literal["full", "sliding"], ...]
    mlp: tuple[Literal["dense", "moe"], ...]
    #: the class of one layer of the stack (what FSDP wraps), and the vocabulary of the embeddings
    block: Name | None = None
    vocab: Count | None = None


class Attention(Value):
    """The attention of the layers: its kind and widths (MLA's ranks and head parts)."""

    kind: Literal["mha", "gqa", "mqa", "mla"]
    heads: Positive
    kv_heads: Positive
    #: query/key width of a head (MLA: the no-rope and rope parts together) and value width
    head_dim: Positive
    v_head_dim: Positive
    sliding_window: Positive | None = None
    kv_lora_rank: Positive | None = None
    q_lora_rank: Positive | None = None
    qk_rope_head_dim: Count | None = None
    qk_nope_head_dim: Count | None = None


class Moe(Value):
    """Mixture-of-experts routing, read from the expert banks and routers built."""

    routed_experts: Positive
    top_k: Positive
    shared_experts: Count
    moe_layers: Count
    expert_intermediate: Count | None


class KvCache(Value):
    """What the model's own cache keeps for each token, measured by a forward pass on the meta
    device: elements (multiply by the cache's element size), all layers and per layer."""

    elements_per_token: Count
    per_layer: tuple[Count, ...]
    #: "keys and values" (per K/V head), or MLA's "latent and rope key" (kv_lora_rank + rope dims)
    stores: Literal["keys and values", "latent and rope key"]
    #: sliding layers keep at most this many positions
    window: Positive | None


class Flops(Value):
    """Forward matmul FLOPs a token costs at context length T::

        per_token + attention_per_position * T + sliding_attention_per_position * min(T, window)

    (T is the positions a token attends to: the mean over a causal sequence is about half of it)."""

    matmul_params: Count
    active_matmul_params: Count
    #: 2 x the active matmul parameters
    per_token: Count
    attention_per_position: Count
    sliding_attention_per_position: Count


class Component(Value):
    """One model of a diffusers pipeline."""

    name: Name
    library: Literal["diffusers", "transformers"]
    class_name: Name
    parameters: Parameters


class Versions(Value):
    torch: Name
    transformers: Name
    diffusers: Name


class ModelFacts(Value):
    """What the real module says of a model (docs/model-facts.md)."""

    library: Literal["transformers", "diffusers"]
    class_name: Name
    model_type: Name
    parameters: Parameters
    layers: Layers | None
    attention: Attention | None
    moe: Moe | None
    kv_cache: KvCache | None
    flops: Flops | None
    components: tuple[Component, ...]
    notes: tuple[Annotated[str, msgspec.Meta(max_length=1000)], ...]
    versions: Versions
    #: the classes the model says are never split across devices (``_no_split_modules``:
    #: its decoder layer), the units FSDP wraps
    no_split_modules: tuple[Name, ...] = ()


# ------------------------------------------------------------------------------- the request


def request_of(config: dict | str | os.PathLike[str]) -> dict[str, Any]:
    """The subprocess's request for ``config``: a config.json's contents, or a path to a
    config.json, a folder holding one, or a diffusers folder (``model_index.json``)."""
    if isinstance(config, dict):
        return {"config": config}
    if not isinstance(config, (str, os.PathLike)):
        raise FactsError(f"a config is a dict or a path, not {type(config).__name__}")
    path = Path(config)
    if path.is_dir() and (path / "model_index.json").exists():
        index = _read_json(path / "model_index.json")
        configs = {}
        for name, entry in sorted(index.items()):
            if name.startswith("_") or not isinstance(entry, list) or len(entry) != 2 or entry[0] is None:
                continue
            library = entry[0]
            if library not in ("diffusers", "transformers"):
                raise FactsError(f"{path / 'model_index.json'}: component {name!r} is {library}.{entry[1]}: only "
                                 "diffusers and transformers classes are built")
            if (path / name / "config.json").exists():  # a model; a scheduler or tokenizer has none
                configs[name] = _read_json(path / name / "config.json")
        if not configs:
            raise FactsError(f"{path}: model_index.json names no component with a config.json")
        return {"pipeline": index, "configs": configs}
    if path.is_dir():
        path = path / "config.json"
    return {"config": _read_json(path)}


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a regular file of at most ``MAX_BYTES``)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise FactsError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise FactsError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FactsError(f"{path}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise FactsError(f"{path}: not a JSON object")
    return value


def canonical(request: dict[str, Any]) -> bytes:
    """The request as canonical JSON (sorted keys, no spaces): what the cache key hashes."""
    try:
        return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False).encode("ascii")
    except (TypeError, ValueError) as exc:
        raise FactsError(f"the config holds a value JSON cannot say: {exc}") from None


def installed() -> dict[str, str]:
    """The torch, transformers and diffusers versions installed ("" where one is not)."""
    out = {}
    for name in ("torch", "transformers", "diffusers"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = ""
    return out


def key(request: dict[str, Any]) -> str:
    """The sha256 of the canonical request and the libraries' versions, in hex."""
    digest = hashlib.sha256(FORMAT.encode("ascii") + b"\0")
    digest.update(json.dumps(installed(), sort_keys=True).encode("ascii") + b"\0")
    digest.update(canonical(request))
    return digest.hexdigest()


# ------------------------------------------------------------------------------- the answer


def facts(config: dict | str | os.PathLike[str]) -> ModelFacts:
    """The facts of ``config`` (see ``request_of``), from the cache when it holds them."""
    return facts_of([config])[0]


def facts_of(configs: Sequence[dict | str | os.PathLike[str]]) -> list[ModelFacts]:
    """The facts of each of ``configs``, in order: those the cache holds read back, the others
    built in one subprocess (the libraries imported once).  The first that fails raises."""
    requests = [request_of(c) for c in configs]
    needed = ("torch", "transformers", "diffusers") if any("pipeline" in r for r in requests) else ("torch",
                                                                                                    "transformers")
    missing = [name for name in needed if find_spec(name) is None]
    if missing:
        raise Unavailable(f"reading a model's facts from its module needs {' and '.join(missing)}: "
                          f"pip install 'accelctl[{EXTRA}]'")
    keys = [key(r) for r in requests]
    where = folder()
    got: list[ModelFacts | None] = [load(where, k) if where is not None else None for k in keys]
    for i, g in enumerate(got):
        said = refusal(where, keys[i]) if g is None and where is not None else None
        if said is not None:
            raise FactsError(said)
    todo = [i for i, g in enumerate(got) if g is None]
    if todo:
        answers = _run({"batch": [requests[i] for i in todo]}, len(todo))
        if not isinstance(answers, list) or len(answers) != len(todo):
            raise FactsError("the subprocess answered something other than facts")
        for i, reply in zip(todo, answers):
            if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
                raise FactsError("the subprocess answered something other than facts")
            if not reply["ok"]:
                if reply.get("refused") is True and where is not None:
                    store_refusal(where, keys[i], str(reply.get("error"))[:2000])
                raise FactsError(_said(str(reply.get("error"))))
            got[i] = checked(reply.get("facts"))
            if where is not None:
                store(where, keys[i], got[i])
    return got  # type: ignore[return-value]


def checked(data: Any) -> ModelFacts:
    """``data`` as ``ModelFacts``: every field of its type (counts integers from 0), and the
    parts adding up; ``FactsError`` for anything else."""
    try:
        got = msgspec.convert(data, ModelFacts)
    except msgspec.ValidationError as exc:
        raise FactsError(f"the facts do not read back: {exc}") from None
    problems = []
    for where, p in [("parameters", got.parameters), *((f"components.{c.name}", c.parameters) for c in got.components)]:
        parts = (p.embeddings + p.attention + p.mlp + p.experts + p.router + p.shared_experts + p.norms + p.lm_head
                 + p.conv + p.other)
        if parts != p.total:
            problems.append(f"{where}: the parts add up to {parts}, not the total {p.total}")
        if p.active > p.total:
            problems.append(f"{where}: active {p.active} is more than the total {p.total}")
    if got.components and sum(c.parameters.total for c in got.components) != got.parameters.total:
        problems.append("the components do not add up to the total")
    if got.layers is not None and not (len(got.layers.attention) == len(got.layers.mlp) == got.layers.count):
        problems.append("layers: a kind for each layer is missing")
    if got.kv_cache is not None and sum(got.kv_cache.per_layer) != got.kv_cache.elements_per_token:
        problems.append("kv_cache: the layers do not add up to the total")
    if got.flops is not None and (got.flops.per_token != 2 * got.flops.active_matmul_params
                                  or got.flops.active_matmul_params > got.flops.matmul_params):
        problems.append("flops: per_token is not twice the active matmul parameters")
    if problems:
        raise FactsError("the facts do not hold together: " + "; ".join(problems))
    return got


def _run(request: dict[str, Any], count: int) -> Any:
    """The subprocess's answers to the ``count`` requests of the batch ``request``, or
    ``FactsError`` when it gave none (it failed, was killed, or took too long)."""
    global runs
    payload = canonical(request)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.setdefault("OMP_NUM_THREADS", "1")
    try:
        proc = subprocess.Popen([sys.executable, "-m", MODEL_FACTS], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
                                preexec_fn=_bound_memory, close_fds=True)
    except OSError as exc:
        raise FactsError(f"could not start {sys.executable} -m {MODEL_FACTS}: {exc}") from None
    runs += 1
    limit = TIMEOUT_S + PER_MODEL_S * (count - 1)
    out, err, finished = _exchange(proc, payload, limit)
    if not finished:
        raise FactsError(f"building the module took over {limit} s; it was stopped")
    tail = err.decode("utf-8", "replace").strip().splitlines()[-5:]
    try:
        reply = json.loads(out)
    except ValueError:
        why = f"exit status {proc.returncode}" if proc.returncode >= 0 else f"signal {-proc.returncode}"
        if proc.returncode in (-signal.SIGKILL, -signal.SIGSEGV) or any("MemoryError" in t for t in tail):
            why += f" (its memory bound is {MEMORY_BYTES // 2**20} MiB)"
        raise FactsError(f"the module could not be built ({why}): {' | '.join(tail)[-1000:]}") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise FactsError("the subprocess answered something other than facts")
    if not reply["ok"]:
        raise FactsError(str(reply.get("error"))[:2000])
    return reply.get("answers")


def _said(error: str) -> str:
    """The subprocess's error, with its memory bound named where memory ran out."""
    if any(w in error for w in ("MemoryError", "failed to map", "Cannot allocate memory", "out of its memory")):
        error += f" (its memory bound is {MEMORY_BYTES // 2**20} MiB)"
    return error[:2000]


def _exchange(proc: subprocess.Popen, payload: bytes, limit: float) -> tuple[bytes, bytes, bool]:
    """Send ``payload``, gather stdout and stderr, and wait at most ``limit`` seconds for the end;
    then end the process group (what the child started too) while the child is not yet reaped,
    so its id names no other group; then reap it.  Whether it finished in time comes last."""
    import select
    import threading

    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def drain(stream, into: list[bytes]) -> None:
        try:
            while block := stream.read1(1 << 16):
                into.append(block)
        except (OSError, ValueError):
            pass

    readers = [threading.Thread(target=drain, args=(s, chunks[n]), daemon=True)
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in readers:
        t.start()
    finished = False
    pidfd = None
    try:
        try:
            proc.stdin.write(payload)
            proc.stdin.close()
        except OSError:  # it ended before reading: its stderr says why
            pass
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        if pidfd is not None:
            try:
                finished = bool(select.select([pidfd], [], [], limit)[0])
            finally:
                os.close(pidfd)
        else:  # no pidfd: waited for (and reaped) at once
            try:
                proc.wait(limit)
                finished = True
            except subprocess.TimeoutExpired:
                pass
    finally:
        if pidfd is not None or not finished:  # the child is not reaped yet: its id is its group's
            _end_group(proc.pid)
        proc.wait()
        for t in readers:
            t.join(5)
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    return b"".join(chunks["out"]), b"".join(chunks["err"]), finished


def _bound_memory() -> None:
    """In the child before exec: its address space bounded (``MEMORY_BYTES``)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(MEMORY_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))


def _end_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------------- the cache


def folder() -> Path | None:
    """Where the entries go; None when the cache is off (``ACCELCTL_MODEL_FACTS_CACHE=off``)."""
    chosen = os.environ.get(ENV)
    if chosen == "off":
        return None
    return Path(chosen) if chosen else cache_dir() / "model-facts"


def entry_path(where: Path, entry_key: str) -> Path:
    return where / f"{entry_key}.json"


def load(where: Path, entry_key: str) -> ModelFacts | None:
    """The facts kept under ``entry_key``, or None: a miss for any reason (none kept, a folder or
    file others could write, a link, a truncated or altered entry, a value out of bounds)."""
    if not os.path.isdir(where):
        return None
    problem = private_files.folder_problem(where)
    if problem:
        private_files.distrust(WHAT, where, problem)
        return None
    data = _entry(where, entry_key)
    if data is None or "facts" not in data or not _finite(data["facts"]):  # a kept refusal has none
        return None
    try:
        return checked(data["facts"])
    except FactsError:
        return None


def refusal(where: Path, entry_key: str) -> str | None:
    """The builder's refusal kept under ``entry_key`` (a model_type transformers does not know,
    a size no model has: the same request, refused the same way by the same libraries), or None."""
    if not os.path.isdir(where) or private_files.folder_problem(where):
        return None
    data = _entry(where, entry_key)
    said = data.get("refused") if data is not None else None
    return said if isinstance(said, str) and said else None


def _entry(where: Path, entry_key: str) -> dict | None:
    """The entry kept under ``entry_key`` in a trusted folder, as read (this format, this key),
    or None: missing, unreadable, not JSON, or another request's."""
    try:
        data = json.loads(private_files.read_file(entry_path(where, entry_key), MAX_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != entry_key:
        return None
    return data


def _finite(value: Any, depth: int = 0) -> bool:
    """No NaN or infinity anywhere in ``value`` (JSON as Python reads it allows them)."""
    if depth > 32:
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v, depth + 1) for v in value)
    return True


def store(where: Path, entry_key: str, got: ModelFacts) -> None:
    """Keep ``got`` under ``entry_key``, written whole (a file of its own, renamed into place);
    quietly nothing when the folder cannot be written, or others could write it."""
    _write(where, entry_key, {"facts": msgspec.to_builtins(got)})


def store_refusal(where: Path, entry_key: str, said: str) -> None:
    """Keep the builder's refusal of the request under ``entry_key`` (``refusal`` reads it)."""
    _write(where, entry_key, {"refused": said})


def _write(where: Path, entry_key: str, body: dict[str, Any]) -> None:
    problem = private_files.make_folder(where)
    if problem:
        private_files.distrust(WHAT, where, problem)
        return
    entry = entry_path(where, entry_key)
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.{_thread.get_ident()}.tmp")
    text = json.dumps({"format": FORMAT, "key": entry_key, **body}, sort_keys=True,
                      allow_nan=False).encode("ascii")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            rest = memoryview(text)
            while rest:
                rest = rest[os.write(fd, rest):]
        finally:
            os.close(fd)
        os.replace(tmp, entry)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass

"""Check DeepSpeed plans against DeepSpeed itself: ``check_plan_with_deepspeed(plan, spec)``.

All of it DeepSpeed's own code, run offline (no process group, no launch): ``ds_config.json``
through ``DeepSpeedConfig`` (with a ``dist`` shim giving the target's data-parallel world size)
and what it reads compared with the workload; its top-level keys against the set DeepSpeed
looks up (it ignores unknown ones silently); ``ds_inference.json`` through
``DeepSpeedInferenceConfig`` and AutoTP's ``supported()``; every ``deepspeed`` command through
the launcher's ``parse_args`` and resource resolution; ``hostfile`` and ``deepspeed_env``.

deepspeed is imported lazily, on the first call.  The result is a list of ``Diagnostic`` (empty:
DeepSpeed accepts the plan), spans from ``spec.origins``.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import logging
import os
import tempfile
import types
from functools import lru_cache
from typing import Any, Iterator

from accelctl import entrypoints
from accelctl.backends.deepspeed import launch as L
from accelctl.backends.deepspeed.release import AUTOTP_CLASS, CONFIG_FILE, DEEPSPEED_VERSION, INFERENCE_FILE
from accelctl.backends.findings import CheckResult, not_run
from accelctl.contract.plan import FREE_PORT, RUN_DIR, Launch, Plan
from accelctl.errors import Diagnostic, did_you_mean
from accelctl.workload.types import TargetSpec, WorkloadSpec

BACKENDS = ("deepspeed", "deepspeed_inference")

#: ds_config key -> the workload settings that produce it, most specific first ({t}: target)
KEY_ORIGINS: dict[str, tuple[str, ...]] = {
    "train_micro_batch_size_per_gpu": ("targets.{t}.micro_batch", "targets.{t}.batch.micro", "batch.micro",
                                       "task.batch_size"),
    "gradient_accumulation_steps": ("targets.{t}.batch.accumulation", "batch.accumulation"),
    "train_batch_size": ("targets.{t}.batch.global", "batch.global", "targets.{t}.batch.micro", "batch.micro",
                         "targets.{t}.nodes", "targets.{t}.devices"),
    "zero_optimization": ("targets.{t}.parallel",),
    "zero_allow_untested_optimizer": ("optimizer", "targets.{t}.parallel"),
    "bf16": ("targets.{t}.precision", "precision"),
    "fp16": ("targets.{t}.precision", "precision"),
    "gradient_clipping": ("optimizer.grad_clip", "optimizer"),
    "optimizer": ("optimizer.lr", "optimizer", "targets.{t}.parallel"),
    # ds_inference.json
    "tensor_parallel": ("targets.{t}.parallel",),
    "replace_with_kernel_inject": ("targets.{t}.parallel",),
    "dtype": ("targets.{t}.precision", "precision"),
    # launcher
    "world": ("engines.deepspeed.hosts", "targets.{t}.nodes", "targets.{t}.devices"),
    "master_port": ("engines.deepspeed.master_port",),
    "hosts": ("engines.deepspeed.hosts", "engines.deepspeed.hostfile", "targets.{t}.nodes"),
    "launcher": ("engines.deepspeed.launcher",),
}
BATCH_KEYS = ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size")


# ----------------------------------------------------------------------------- helpers


def _where(spec: WorkloadSpec, target: TargetSpec, key: str):
    paths = [p.format(t=target.name) for p in KEY_ORIGINS.get(key, ())] + [f"targets.{target.name}"]
    return next((spec.origins[p] for p in paths if p in spec.origins), None)


def _diag(spec, target, key: str, code: str, message: str, hint: str = "", severity: str = "error") -> Diagnostic:
    return Diagnostic(code, message, _where(spec, target, key), spec.path, hint, severity)


def _short(exc: BaseException, lines: int = 4) -> str:
    kept = [ln.strip() for ln in str(exc).strip().splitlines()
            if ln.strip() and not ln.strip().startswith("For further information")]
    text = " ".join(kept[:lines])
    return f"{type(exc).__name__}: {text}"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """DeepSpeed logs INFO lines while validating; keep them out of the caller's output."""
    from deepspeed.utils import logger

    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _world(world_size: int) -> Iterator[None]:
    """``deepspeed.runtime.config.dist`` reporting ``world_size`` ranks (LAB §3)."""
    import deepspeed.runtime.config as dsc

    orig = dsc.dist
    dsc.dist = types.SimpleNamespace(get_rank=lambda *a, **k: 0, get_world_size=lambda *a, **k: world_size)
    try:
        yield
    finally:
        dsc.dist = orig


def validate_ds_config(cfg: dict[str, Any], world_size: int):
    """DeepSpeed's parsed config, or the exception it raised."""
    from deepspeed.runtime.config import DeepSpeedConfig

    with _quiet(), _world(world_size):
        try:
            return DeepSpeedConfig(dict(cfg))
        except Exception as exc:  # noqa: BLE001 - AssertionError, ValidationError, DeepSpeedConfigError...
            return exc


@lru_cache(maxsize=1)
def top_level_keys() -> frozenset[str]:
    """The top-level keys DeepSpeedConfig reads, recorded from the installed release."""
    from deepspeed.runtime import config as dsc

    seen: set[str] = set()

    class Recording(dict):
        def get(self, k, *a):
            seen.add(k)
            return super().get(k, *a)

        def __getitem__(self, k):
            seen.add(k)
            return super().__getitem__(k)

        def __contains__(self, k):
            seen.add(k)
            return super().__contains__(k)

        def pop(self, k, *a):
            seen.add(k)
            return super().pop(k, *a)

        def keys(self):  # ``k in d.keys()`` is a lookup too
            d = self

            class Keys:
                def __contains__(self, k):
                    seen.add(k)
                    return dict.__contains__(d, k)

                def __iter__(self):
                    return iter(dict.keys(d))

                def __len__(self):
                    return len(d)

            return Keys()

    probes = (
        {"train_micro_batch_size_per_gpu": 1},
        {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
         "bf16": {"enabled": True}, "gradient_clipping": 1.0,
         "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}},
         "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "scheduler": {"type": "WarmupLR", "params": {}}},
        {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}, "zero_optimization": {"stage": 1}},
    )
    with _quiet(), _world(2):
        for cfg in probes:
            dsc.DeepSpeedConfig(Recording(cfg))
    removed = set(getattr(dsc, "_REMOVED_TOP_LEVEL_CONFIG_KEYS", {}))
    return frozenset(k for k in seen if isinstance(k, str)) - removed


def _culprit(cfg: dict[str, Any], world_size: int) -> str:
    """The key whose addition makes DeepSpeed refuse the config (batch keys first, then in order)."""
    base: dict[str, Any] = {}
    for key in BATCH_KEYS:
        if key in cfg:
            base[key] = cfg[key]
            if isinstance(validate_ds_config(base, world_size), Exception):
                return key
    if not base:
        return "train_micro_batch_size_per_gpu"
    for key, value in cfg.items():
        if key in base:
            continue
        base[key] = value
        if isinstance(validate_ds_config(base, world_size), Exception):
            return key
    return next(iter(cfg), "train_micro_batch_size_per_gpu")


# ----------------------------------------------------------------------------- the checks


def check_ds_config(cfg: dict[str, Any], spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    known = top_level_keys()
    for key in cfg:
        if key not in known:
            # positioned at the setting the key was probably meant for (zero_optimisation -> parallel)
            close = difflib.get_close_matches(key, KEY_ORIGINS, n=1, cutoff=0.6)
            out.append(_diag(spec, target, close[0] if close else key, "E541",
                             f"DeepSpeed {_version()} does not read the top-level key '{key}' of ds_config.json "
                             "(it would be ignored without a word)", did_you_mean(key, known)))
    world = target.data_parallel
    parsed = validate_ds_config(cfg, world)
    if isinstance(parsed, Exception):
        key = _culprit(cfg, world)
        out.append(_diag(spec, target, key, "E540",
                         f"DeepSpeed {_version()} rejects ds_config.json ('{key}'): {_short(parsed)}",
                         f"'{key}' comes from this setting; DeepSpeedConfig checked it for {world} "
                         "data-parallel rank(s)"))
        return out
    p, b, prec = target.parallel, target.batch, target.precision.dtype
    want = {
        "train_micro_batch_size_per_gpu": (parsed.train_micro_batch_size_per_gpu, b.micro),
        "gradient_accumulation_steps": (parsed.gradient_accumulation_steps, b.accumulation),
        "train_batch_size": (parsed.train_batch_size, b.micro * b.accumulation * world),
        "zero_optimization": (parsed.zero_optimization_stage, p.zero_stage if p.strategy == "zero" else 0),
        "bf16": (bool(parsed.bfloat16_config.enabled), prec == "bf16"),
        "fp16": (bool(parsed.float16_config.enabled), prec == "fp16"),
        "gradient_clipping": (float(parsed.gradient_clipping), float(spec.optimizer.grad_clip)),
    }
    zc = parsed.zero_config
    def device(section) -> str:  # an enum, or its value (pydantic use_enum_values)
        return "none" if section is None else str(getattr(section.device, "value", section.device))

    offload_opt, offload_par = device(zc.offload_optimizer), device(zc.offload_param)
    want["zero_optimization.offload"] = ((offload_opt, offload_par), (p.offload_optimizer, p.offload_param))
    for key, (got, expected) in want.items():
        if got != expected:
            top = key.split(".")[0]
            out.append(_diag(spec, target, top, "E540",
                             f"DeepSpeed {_version()} reads {key} = {got!r} from ds_config.json, but the workload "
                             f"says {expected!r}", f"write '{top}' explicitly: DeepSpeed's default differs"))
    out += _check_optimizer(cfg, parsed, spec, target)
    return out


def _check_optimizer(cfg, parsed, spec, target) -> list[Diagnostic]:
    """DeepSpeed's own optimizer (``"optimizer": {"type": ...}``): a name DeepSpeed builds, and
    under ZeRO one it supports or the untested switch (FusedLamb is not in ZeRO's list); a
    client optimizer under ZeRO: DeepSpeed's supported list, or the untested switch."""
    if "optimizer" in cfg:
        return _check_own_optimizer(parsed, spec, target)
    if parsed.zero_optimization_stage == 0:
        return []
    import torch
    from deepspeed.runtime.zero.utils import ZERO_SUPPORTED_OPTIMIZERS

    client = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}.get(spec.optimizer.name)
    if spec.optimizer.name == "lamb":
        from timm.optim import Lamb as client
    if client is None or client in ZERO_SUPPORTED_OPTIMIZERS or parsed.zero_allow_untested_optimizer:
        return []
    return [_diag(spec, target, "optimizer", "E540",
                  f"DeepSpeed {_version()} refuses {client.__name__} under ZeRO stage "
                  f"{parsed.zero_optimization_stage} without \"zero_allow_untested_optimizer\": true")]


def _check_own_optimizer(parsed, spec, target) -> list[Diagnostic]:
    from deepspeed.runtime.config import DEEPSPEED_OPTIMIZERS, LAMB_OPTIMIZER

    name = (parsed.optimizer_name or "").lower()
    if name not in DEEPSPEED_OPTIMIZERS:
        return [_diag(spec, target, "optimizer", "E540",
                      f"DeepSpeed {_version()} builds no optimizer of type {parsed.optimizer_name!r} "
                      f"({', '.join(DEEPSPEED_OPTIMIZERS)})")]
    if name == LAMB_OPTIMIZER and parsed.zero_optimization_stage > 0 and not parsed.zero_allow_untested_optimizer:
        return [_diag(spec, target, "optimizer", "E540",
                      f"DeepSpeed {_version()} refuses its FusedLamb under ZeRO stage {parsed.zero_optimization_stage} "
                      "without \"zero_allow_untested_optimizer\": true")]
    return []


def check_inference_config(cfg: dict[str, Any], spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
    import torch
    from deepspeed.inference.config import DeepSpeedInferenceConfig
    from pydantic import ValidationError

    try:
        with _quiet():
            parsed = DeepSpeedInferenceConfig(**cfg)
    except ValidationError as exc:
        loc = exc.errors()[0].get("loc") or ("tensor_parallel",)
        key = str(loc[0])
        return [_diag(spec, target, key, "E544",
                      f"DeepSpeed {_version()} rejects ds_inference.json ('{key}'): {_short(exc)}")]
    except Exception as exc:  # noqa: BLE001
        return [_diag(spec, target, "tensor_parallel", "E544",
                      f"DeepSpeed {_version()} rejects ds_inference.json: {_short(exc)}")]
    p = target.parallel
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    want = {
        "tensor_parallel": (parsed.tensor_parallel.tp_size, p.tp),
        "replace_with_kernel_inject": (parsed.replace_with_kernel_inject, bool(p.kernel_inject)),
        "dtype": (parsed.dtype, dtypes.get(target.precision.dtype, torch.float32)),
    }
    out = [_diag(spec, target, key, "E544", f"DeepSpeed {_version()} reads {key} = {got!r} from "
                 f"ds_inference.json, but the workload says {expected!r}")
           for key, (got, expected) in want.items() if got != expected]
    if p.tp > 1 and not p.kernel_inject and spec.model.family in AUTOTP_CLASS:
        from deepspeed.module_inject.auto_tp import AutoTP

        if not AutoTP.supported(AUTOTP_CLASS[spec.model.family]):
            out.append(_diag(spec, target, "tensor_parallel", "E544",
                             f"DeepSpeed {_version()} AutoTP cannot shard {spec.model.family} "
                             "('AutoTP not supported for model')", "use tp = 1, or kernel_inject = on on a GPU"))
    return out


def _file_text(plan: Plan, path: str) -> str | None:
    rel = path[len(RUN_DIR) + 1:] if path.startswith(RUN_DIR + "/") else None
    if rel is None:
        return None
    return next((f.content for f in plan.files if f.path == rel), None)


def read_hostfile(text: str) -> dict[str, int]:
    """DeepSpeed's ``fetch_hostfile`` on this text (raises its ValueError)."""
    from deepspeed.launcher.runner import fetch_hostfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "hostfile")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        with _quiet():
            return dict(fetch_hostfile(path))


def parse_launcher(argv: list[str]):
    """``deepspeed.launcher.runner.parse_args`` on argv (without the head); (args, error text).
    ``{free_port}`` is a port the runner picks per run (an int in 1..65535): a stand-in is parsed."""
    from deepspeed.launcher.runner import parse_args

    argv = [a.replace(FREE_PORT, str(L.DEFAULT_MASTER_PORT)) for a in argv]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parse_args(argv), ""
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return None, (lines[-1] if lines else f"argparse exit {exc.code}")


def _intended_pool(spec: WorkloadSpec, target: TargetSpec) -> dict[str, int] | None:
    """host -> slots, in order, that a hostfile generated from ``engine deepspeed { hosts }``
    must read back as (None: no hosts listed, the plan's placeholder hosts)."""
    eng = spec.engines.get("deepspeed")
    hosts = list((eng.settings.get("hosts") if eng is not None else None) or [])[:target.nodes]
    return {h: target.devices for h in hosts} if hosts else None


def check_launch(launch: Launch, plan: Plan, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
    from deepspeed.launcher import runner as R

    argv = list(launch.argv)
    if not argv or argv[0] != "deepspeed":
        return [_diag(spec, target, "world", "E542", f"launch {launch.name} of a DeepSpeed plan does not start the "
                      f"deepspeed launcher: {argv[:1]}")]
    args, error = parse_launcher(argv[1:])
    if args is None:
        return [_diag(spec, target, "world", "E542",
                      f"DeepSpeed's launcher rejects launch {launch.name}: {error}", launch.shell())]
    out: list[Diagnostic] = []
    bad = []
    if args.user_script != entrypoints.WORKER or not args.module:
        bad.append(f"it would run {args.user_script!r} as a {'module' if args.module else 'script'}, "
                   "not the module accelctl.worker")
    if not args.no_local_rank:
        bad.append("without --no_local_rank the worker gets a --local_rank=N argument it does not take")
    if args.no_python and args.module:
        bad.append("--no_python and --module cannot be combined (deepspeed.launcher.launch raises)")
    if args.user_args != [f"{RUN_DIR}/job.json"]:
        bad.append(f"the worker's arguments are {args.user_args}, not [{RUN_DIR}/job.json]")
    out += [_diag(spec, target, "world", "E542", f"launch {launch.name}: {b}") for b in bad]

    # the resources the runner would resolve, with its own functions
    hostfile_text = _file_text(plan, args.hostfile)
    if hostfile_text is None and os.path.isfile(args.hostfile):
        with open(args.hostfile, encoding="utf-8") as fh:
            hostfile_text = fh.read()
    listed = "--hostfile" in argv or "-H" in argv
    if hostfile_text is None and listed:
        out.append(_diag(spec, target, "hosts", "E543", f"the hostfile {args.hostfile} is neither generated by the "
                         "plan nor present here; its hosts cannot be checked", severity="warning"))
        return out
    try:
        pool = read_hostfile(hostfile_text) if hostfile_text is not None else None
    except ValueError as exc:
        return out + [_diag(spec, target, "hosts", "E543", f"DeepSpeed's fetch_hostfile rejects the hostfile: {exc}")]
    intended = _intended_pool(spec, target) if _file_text(plan, args.hostfile) is not None else None
    if intended is not None and list((pool or {}).items()) != list(intended.items()):
        return out + [_diag(spec, target, "hosts", "E543", f"DeepSpeed reads the generated hostfile as "
                            f"{dict(pool or {})}, not the hosts the plan lists {intended}")]
    if not pool:  # no hostfile: the local accelerator's devices, trimmed by --num_gpus
        pool = {"localhost": max(args.num_gpus, 1)}
    multi_node = hostfile_text is not None
    try:
        active = R.parse_inclusion_exclusion(pool, args.include, args.exclude)
        active = R.apply_num_nodes_and_gpus(active, args.num_nodes, args.num_gpus)
        launcher_cls = getattr(R, "LAUNCHER_CLASSES", {}).get(args.launcher.lower())
        if launcher_cls is None and multi_node and len(active) > 1 and not args.no_ssh:
            raise ValueError(f"unknown launcher backend {args.launcher!r}")
        if launcher_cls is not None:
            launcher_cls.validate_active_resources(active)
        R.encode_world_info(active)
    except (ValueError, AssertionError, KeyError) as exc:
        key = "launcher" if "launcher" in str(exc) else "hosts"
        return out + [_diag(spec, target, key, "E542", f"DeepSpeed's launcher cannot resolve the resources of "
                            f"launch {launch.name}: {_short(exc)}")]
    world = sum(len(slots) for slots in active.values())
    if world != target.world_size:
        out.append(_diag(spec, target, "world", "E542",
                         f"DeepSpeed's launcher would start {world} process(es) ({', '.join(f'{h}: {len(s)}' for h, s in active.items())}), "
                         f"not the target's {target.nodes} x {target.devices} = {target.world_size}",
                         "hosts, nodes and devices must agree"))
    if args.no_ssh and not 0 <= args.node_rank < len(active):
        out.append(_diag(spec, target, "hosts", "E542", f"launch {launch.name}: --no_ssh needs 0 <= --node_rank "
                         f"< {len(active)}, got {args.node_rank}"))
    local = set(active) <= set(L.LOCAL_HOSTS)
    if multi_node and len(active) == 1 and not (args.no_ssh or args.no_ssh_check):
        out.append(_diag(spec, target, "hosts", "E542", f"launch {launch.name}: with a hostfile DeepSpeed checks "
                         f"ssh to {next(iter(active))} first, and fails where there is no passwordless ssh",
                         "add --no_ssh_check (and --master_addr) for a single host"))
    if multi_node and len(active) == 1 and local and not args.master_addr:
        out.append(_diag(spec, target, "hosts", "E542", f"launch {launch.name}: a hostfile with only "
                         f"{next(iter(active))} needs --master_addr, or DeepSpeed asks the host over ssh"))
    if not 0 < args.master_port < 65536:
        out.append(_diag(spec, target, "master_port", "E542", f"master port {args.master_port} is out of range"))
    return out


def check_env_file(text: str, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
    """The runner reads DS_ENV_FILE with ``key, val = line.split('=', maxsplit=1)`` per line."""
    out = []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        if "=" not in line:
            out.append(_diag(spec, target, "world", "E543", f"deepspeed_env line {n} is not KEY=VALUE: {line!r} "
                             "(DeepSpeed's runner would fail splitting it)"))
    return out


@lru_cache(maxsize=1)
def _version() -> str:
    import deepspeed

    return deepspeed.__version__


def check_plan_with_deepspeed(plan: Plan, spec: WorkloadSpec) -> list[Diagnostic]:
    """Every DeepSpeed input of ``plan`` checked by DeepSpeed's own code (see the module doc).

    Plans of other backends give ``[]``.  Raises ``ImportError`` when deepspeed is not
    installed (callers decide whether that is a skip or an error).
    """
    if plan.backend not in BACKENDS:
        return []
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # validation only: never probe for a GPU
    import deepspeed  # noqa: F401  (ImportError here is the caller's to handle)

    target = spec.target(plan.target)
    out: list[Diagnostic] = []
    if _version() != DEEPSPEED_VERSION:
        out.append(_diag(spec, target, "world", "W540", f"plans are written for DeepSpeed {DEEPSPEED_VERSION}; "
                         f"checked with {_version()}", severity="warning"))
    files = {f.path: f.content for f in plan.files}
    for name, check in ((CONFIG_FILE, check_ds_config), (INFERENCE_FILE, check_inference_config)):
        if name in files:
            try:
                cfg = json.loads(files[name])
            except ValueError as exc:
                out.append(_diag(spec, target, "world", "E540", f"{name} is not JSON: {exc}"))
                continue
            out += check(cfg, spec, target)
    if CONFIG_FILE not in files and INFERENCE_FILE not in files:
        out.append(_diag(spec, target, "world", "E540", f"a {plan.backend} plan without {CONFIG_FILE} or "
                         f"{INFERENCE_FILE}"))
    for launch in plan.launches:
        out += check_launch(launch, plan, spec, target)
    if L.ENV_FILE in files:
        out += check_env_file(files[L.ENV_FILE], spec, target)
    return out


def check_results(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    """``check_plan_with_deepspeed`` as ``accelctl plan --check`` reports it (not run without deepspeed)."""
    try:
        diags = check_plan_with_deepspeed(plan, spec)
    except ImportError as exc:
        return [not_run("deepspeed", f"{exc}; pip install 'accelctl[deepspeed]'")]
    errors = [d for d in diags if d.severity == "error"]
    from accelctl.backends.deepspeed.inject_check import check_results as on_the_stack

    return [CheckResult("deepspeed (DeepSpeedConfig, launcher parser, hostfile)", not errors,
                        [d.render().replace("\n", " | ") for d in diags]), *on_the_stack(plan, spec)]

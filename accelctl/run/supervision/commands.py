"""A plan's launch, resolved into the exact argv, environment and folder the runner uses.

Pure functions (``accelctl.run.supervision.runner`` starts things), so a "resolved" plan prints with the code
that runs it.  Placeholders are filled in every argv word, environment value and ``cwd``:
``{run_dir}``, ``ENV_PLACEHOLDERS`` from the environment (unset is an error) and the run's
``{free_port}``, picked once per run so every launch agrees.  ``python``, ``torchrun`` and
``deepspeed`` heads map to this interpreter.  The runner adds ``ACCELCTL_EVENTS_DIR``,
``PYTHONUNBUFFERED=1`` unless set (a crash's last words reach ``worker.log``) and this package's
folder in front of ``PYTHONPATH`` (the worker imports the same code, installed or not).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from accelctl.contract import envnames, launchers, placeholders
from accelctl.contract.plan import ENV_PLACEHOLDERS, FREE_PORT, RUN_DIR, Launch, Plan

EVENTS_DIR_ENV = envnames.EVENTS_DIR
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])


class UnresolvedPlaceholder(ValueError):
    """A plan uses a placeholder whose environment variable is not set."""


@dataclass(frozen=True)
class ResolvedLaunch:
    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    #: working directory; None = the runner's own
    cwd: str | None
    wait: bool = False


#: ports this process handed out lately: a run started a moment later gets another one even
#: before the first run's launcher has bound its port
_RECENT: deque[int] = deque(maxlen=64)
_RECENT_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now: the kernel's pick for a socket bound to port 0, not
    one of the last ports this process handed out.  (Released again at once; the launcher that
    is handed it binds it moments later.)"""
    with _RECENT_LOCK:
        for _ in range(16):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if port not in _RECENT:
                break
        _RECENT.append(port)
        return port


def uses(plan: Plan, placeholder: str) -> bool:
    """Whether any launch (argv, environment, folder) or generated file of ``plan`` uses ``placeholder``."""
    texts = [f.content for f in plan.files if f.template]
    for launch in plan.launches:
        texts += [*launch.argv, *launch.env.values(), launch.cwd]
    return any(placeholder in t for t in texts)


def run_values(plan: Plan) -> dict[str, str]:
    """The placeholders whose value is picked once per run (``{free_port}``), for a run of ``plan``."""
    return {FREE_PORT: str(free_port())} if uses(plan, FREE_PORT) else {}


def substitutions(run_dir: Path, env: Mapping[str, str],
                  run_values: Mapping[str, str] | None = None) -> dict[str, str | None]:
    subs: dict[str, str | None] = {RUN_DIR: str(run_dir), FREE_PORT: None}
    for placeholder, var in ENV_PLACEHOLDERS.items():
        subs[placeholder] = env.get(var) or None
    subs.update(run_values or {})
    return subs


def _unresolved(placeholder: str) -> str:
    if placeholder in ENV_PLACEHOLDERS:
        raise UnresolvedPlaceholder(f"{placeholder} is used by the plan but "
                                    f"${ENV_PLACEHOLDERS[placeholder]} is not set")
    raise UnresolvedPlaceholder(f"{placeholder} is used by the plan but no value was picked for this run")


def fill(text: str, subs: Mapping[str, str | None]) -> str:
    """``text`` with its placeholders filled in one pass (``placeholders.fill``: a value that
    holds a placeholder's name, a run folder under ``/tmp/{free_port}/`` say, is not filled again)."""
    return placeholders.fill(text, subs, _unresolved)


#: symbolic argv heads of plans -> what runs them with accelctl's own interpreter, so every
#: process of a run uses the same environment (``accelctl.contract.launchers``, stated once)
HEADS = launchers.HEADS


def resolve_argv(argv: Iterable[str], run_dir: Path, env: Mapping[str, str] | None = None,
                 run_values: Mapping[str, str] | None = None) -> list[str]:
    """Substitute placeholders and map the symbolic heads (``HEADS``)."""
    subs = substitutions(run_dir, os.environ if env is None else env, run_values)
    args = [fill(a, subs) for a in argv]
    if args and args[0] in HEADS:
        args[:1] = launchers.command(args[0], sys.executable)
    return args


#: where ``wandb.init`` leaves the address of the W&B service (wandb-core) it started, in this
#: process's environment, for later ``wandb`` calls of the same process
WANDB_SERVICE_ENV = "WANDB_SERVICE"


def own_tracker_service(token: str) -> bool:
    """True for a ``WANDB_SERVICE`` token of a service this process started (``track { wandb =
    ... }``: ``<version>-<pid>-unix|tcp-...``, the pid this process's): a launch must not get it,
    or a training script using wandb would log into the runner's service, which the runner ends
    with its run; a token the user set before (another process's service) is passed on."""
    parts = token.split("-", 2)
    return len(parts) == 3 and parts[1] == str(os.getpid())


def launch_env(launch: Launch, run_dir: Path, events_dir: Path, base: Mapping[str, str] | None = None,
               run_values: Mapping[str, str] | None = None) -> dict[str, str]:
    """The full environment of one launch (``base`` defaults to ``os.environ``)."""
    env = dict(os.environ if base is None else base)
    if own_tracker_service(env.get(WANDB_SERVICE_ENV, "")):
        del env[WANDB_SERVICE_ENV]
    subs = substitutions(run_dir, {**env, **launch.env}, run_values)
    env.update({k: fill(v, subs) for k, v in launch.env.items()})
    env[EVENTS_DIR_ENV] = str(events_dir)
    env.setdefault("PYTHONUNBUFFERED", "1")
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PACKAGE_PARENT not in paths:
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_PARENT, *paths])
    return env


def resolve_launch(launch: Launch, run_dir: Path, events_dir: Path, base: Mapping[str, str] | None = None,
                   run_values: Mapping[str, str] | None = None) -> ResolvedLaunch:
    """Everything ``subprocess.Popen`` needs for one launch; raises ``UnresolvedPlaceholder``."""
    env = launch_env(launch, run_dir, events_dir, base, run_values)
    cwd = getattr(launch, "cwd", "") or ""
    return ResolvedLaunch(
        name=launch.name,
        argv=tuple(resolve_argv(launch.argv, run_dir, env, run_values)),
        env=env,
        cwd=fill(cwd, substitutions(run_dir, env, run_values)) if cwd else None,
        wait=bool(getattr(launch, "wait", False)),
    )

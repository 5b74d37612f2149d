"""Check xla_neuron plans and the worker's torch-xla code against torch-xla's own source.

torch-xla 2.9 runs only on exactly torch 2.9.0, so it is not in the development environment;
its python source is read with ``ast`` from a git tag (``GitSource``), a wheel (``WheelSource``)
or an installed package (``DirSource``).  ``api_table(source)`` condenses what the worker may use
(public names and parameters, environment variables, deprecated ones, PJRT devices, process-group
backends) into a JSON table; one built from v2.9.0 ships in ``data/``, and the tests rebuild it
where ``ACCELCTL_TORCH_XLA_SOURCE`` names a source.

``python -m accelctl.backends.xla_neuron.check GIT_DIR TAG`` (or ``WHEEL`` / ``DIR``) prints a table.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from accelctl.backends.findings import Finding

#: modules whose names the table keeps (what a training worker uses)
MODULES = (
    "torch_xla",
    "torch_xla.torch_xla",
    "torch_xla.core.xla_model",
    "torch_xla.runtime",
    "torch_xla.distributed.parallel_loader",
    "torch_xla.distributed.xla_backend",
    "torch_xla.distributed.xla_multiprocessing",
    "torch_xla.debug.metrics",
    "torch_xla.amp",
)
#: torch's own process-group backends and rendezvous schemes (not torch-xla's to register)
TORCH_BACKENDS = ("gloo", "nccl", "mpi", "ucc", "xccl")
TORCH_RENDEZVOUS = ("env", "tcp", "file")


# ------------------------------------------------------------------------------- sources


class GitSource:
    """torch-xla's files at a tag of a git clone (no work tree needed)."""

    def __init__(self, git_dir: str | Path, tag: str) -> None:
        self.git_dir, self.tag = str(git_dir), tag
        self.commit = self._git("rev-parse", f"{tag}^{{commit}}").strip()
        self.label = f"github:pytorch/xla@{tag} ({self.commit})"
        self.version = tag.lstrip("v")

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], check=True, capture_output=True,
                              text=True).stdout

    def files(self) -> list[str]:
        return self._git("ls-tree", "-r", "--name-only", self.tag, "torch_xla").split()

    def read(self, path: str) -> str | None:
        try:
            return self._git("show", f"{self.tag}:{path}")
        except subprocess.CalledProcessError:
            return None


class WheelSource:
    def __init__(self, wheel: str | Path) -> None:
        self.zip = zipfile.ZipFile(wheel)
        self.label = Path(wheel).name
        self.version = Path(wheel).name.split("-")[1]

    def files(self) -> list[str]:
        return [n for n in self.zip.namelist() if n.startswith("torch_xla/")]

    def read(self, path: str) -> str | None:
        try:
            return self.zip.read(path).decode("utf-8")
        except KeyError:
            return None


class DirSource:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.label = str(self.root)
        version = self.read("torch_xla/version.py") or ""
        m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", version)
        self.version = m.group(1) if m else "unknown"

    def files(self) -> list[str]:
        return [str(p.relative_to(self.root)) for p in (self.root / "torch_xla").rglob("*") if p.is_file()]

    def read(self, path: str) -> str | None:
        p = self.root / path
        return p.read_text(encoding="utf-8") if p.exists() else None


def open_source(spec: str):
    """``GIT_DIR@TAG``, a ``.whl`` file, or a folder holding ``torch_xla/``."""
    if "@" in spec:
        git_dir, tag = spec.rsplit("@", 1)
        return GitSource(git_dir, tag)
    if spec.endswith(".whl"):
        return WheelSource(spec)
    return DirSource(spec)


# --------------------------------------------------------------------------------- table


def _module_path(dotted: str, files: set[str]) -> str | None:
    base = dotted.replace(".", "/")
    for cand in (f"{base}.py", f"{base}/__init__.py"):
        if cand in files:
            return cand
    return None


def _signature(fn: ast.FunctionDef, method: bool) -> dict[str, Any]:
    a = fn.args
    positional = [x.arg for x in (*a.posonlyargs, *a.args)]
    required = positional[: len(positional) - len(a.defaults)]
    required += [x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    params = positional[len(a.posonlyargs):] + [x.arg for x in a.kwonlyargs]
    if method and positional:
        params = [p for p in params if p != positional[0]]
        required = [p for p in required if p != positional[0]]
    return {"params": params, "required": required, "varkw": a.kwarg is not None, "line": fn.lineno}


def _module_names(tree: ast.Module) -> dict[str, Any]:
    """Public top-level names -> signature (callables) or None (other names)."""
    out: dict[str, Any] = {}
    for st in tree.body:
        if isinstance(st, ast.FunctionDef):
            out[st.name] = _signature(st, method=False)
        elif isinstance(st, ast.ClassDef):
            init = next((b for b in st.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
            out[st.name] = _signature(init, method=True) if init else {"params": [], "required": [], "varkw": True,
                                                                        "line": st.lineno}
        elif isinstance(st, ast.Assign):
            out.update({t.id: None for t in st.targets if isinstance(t, ast.Name)})
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            out[st.target.id] = None
        elif isinstance(st, ast.Import):
            out.update({(al.asname or al.name).split(".")[0]: None for al in st.names})
        elif isinstance(st, ast.ImportFrom):
            out.update({(al.asname or al.name): None for al in st.names if al.name != "*"})
    return out


def api_table(source) -> dict[str, Any]:
    files = set(source.files())
    modules = sorted(f[:-3].replace("/", ".").removesuffix(".__init__") for f in files if f.endswith(".py"))
    table: dict[str, Any] = {"torch_xla": source.version, "source": source.label, "modules": {},
                             "all_modules": modules}
    trees: dict[str, ast.Module] = {}
    for dotted in MODULES:
        path = _module_path(dotted, files)
        if path is not None:
            trees[dotted] = ast.parse(source.read(path))
            table["modules"][dotted] = _module_names(trees[dotted])
    # ``from .torch_xla import *`` in torch_xla/__init__.py: torch_xla.device(), .sync() ...
    if "torch_xla" in trees and "torch_xla.torch_xla" in table["modules"]:
        star = any(isinstance(st, ast.ImportFrom) and st.module == "torch_xla" and st.level == 1
                   and any(al.name == "*" for al in st.names) for st in trees["torch_xla"].body)
        if star:
            for name, sig in table["modules"]["torch_xla.torch_xla"].items():
                if not name.startswith("_"):
                    table["modules"]["torch_xla"].setdefault(name, sig)
    env_src = source.read("torch_xla/core/xla_env_vars.py") or ""
    table["env_vars"] = sorted({st.value.value for st in ast.parse(env_src).body
                                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant)
                                and isinstance(st.value.value, str)})
    deprecated: dict[str, str] = {}
    cpp = source.read("torch_xla/csrc/dtype.cpp") or ""
    for m in re.finditer(r'GetEnvBool\(\s*"(\w+)"', cpp):
        said = re.search(r'<<\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', cpp[m.end(): m.end() + 400])
        text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', said.group(1))) if said else ""
        if "deprecated" in text:
            deprecated[m.group(1)] = text.replace("\\n", "").strip() + " (torch_xla/csrc/dtype.cpp)"
    if "torch_xla" in trees:
        for node in ast.walk(trees["torch_xla"]):
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "deprecated_env_vars"
                                                     for t in node.targets) and isinstance(node.value, ast.List)):
                for el in node.value.elts:
                    deprecated.setdefault(el.value, "deprecated (torch_xla/__init__.py _check_deprecated_env_var)")
    table["deprecated_env"] = dict(sorted(deprecated.items()))
    runtime = trees.get("torch_xla.runtime")
    devices = set()
    if runtime is not None:
        for node in ast.walk(runtime):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and any(isinstance(t, ast.Subscript) and "PJRT_DEVICE" in ast.unparse(t) for t in node.targets)):
                devices.add(node.value.value)
    table["pjrt_devices"] = sorted(devices)
    backend = trees.get("torch_xla.distributed.xla_backend")
    table["dist_backends"], table["rendezvous"] = [], []
    if backend is not None:
        for node in ast.walk(backend):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                fn = ast.unparse(node.func)
                if fn.endswith("register_backend"):
                    table["dist_backends"].append(node.args[0].value)
                elif fn.endswith("register_rendezvous_handler"):
                    table["rendezvous"].append(node.args[0].value)
    return table


# ---------------------------------------------------------------------------------- checks


def _attr_chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; ``self.xm.f`` -> ["self.xm", "f"] (self attributes kept whole)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    if parts[0] == "self" and len(parts) > 1:
        parts = [f"self.{parts[1]}", *parts[2:]]
    return parts


def check_worker_source(path: str | Path, table: dict[str, Any], used: set[str] | None = None) -> list[Finding]:
    """Every torch_xla module, name and keyword a worker file uses exists in the table's torch-xla.
    ``used`` collects the dotted names found (``torch_xla.core.xla_model.optimizer_step``)."""
    used = set() if used is None else used
    path = Path(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules, mods = set(table["all_modules"]), table["modules"]
    version = table["torch_xla"]
    out: list[Finding] = []
    alias: dict[str, str] = {}  # local name -> torch_xla module

    def at(node: ast.AST) -> str:
        return f"{path.name}:{getattr(node, 'lineno', 0)}"

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for al in node.names:
                if al.name.split(".")[0] != "torch_xla":
                    continue
                if al.name not in modules:
                    out.append(Finding(at(node), f"torch-xla {version} has no module {al.name}"))
                used.add(al.name)
                alias[al.asname or "torch_xla"] = al.name if al.asname else "torch_xla"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch_xla" and node.level == 0:
            for al in node.names:
                full = f"{node.module}.{al.name}"
                if full in modules:
                    alias[al.asname or al.name] = full
                    used.add(full)
                elif node.module in mods and al.name not in mods[node.module]:
                    out.append(Finding(at(node), f"{node.module} has no {al.name} in torch-xla {version}"))
                elif node.module not in modules:
                    out.append(Finding(at(node), f"torch-xla {version} has no module {node.module}"))
    # ``self.xm = xm`` / ``self.torch_xla, self.xm = torch_xla, xm``
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            targets = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else [node.targets[0]]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for t, v in zip(targets, values):
                tc, vc = _attr_chain(t), _attr_chain(v)
                if tc and vc and len(tc) == 1 and len(vc) == 1 and vc[0] in alias:
                    alias[tc[0]] = alias[vc[0]]
    calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        chain = _attr_chain(node)
        if not chain or chain[0] not in alias:
            continue
        module = alias[chain[0]]
        for i, name in enumerate(chain[1:], 1):
            sub = f"{module}.{name}"
            if sub in modules:
                module = sub
                used.add(module)
                continue
            if module not in mods:
                if i == len(chain) - 1:
                    out.append(Finding(at(node), f"{module} is not in the stored torch-xla table; add it to "
                                                 "xla_check.MODULES and rebuild the table"))
                break
            if name not in mods[module]:
                out.append(Finding(at(node), f"{module} has no {name} in torch-xla {version}"))
                break
            used.add(sub)
            if i == len(chain) - 1 and id(node) in calls and mods[module][name] is not None:
                out += _check_kwargs(calls[id(node)], f"{module}.{name}", mods[module][name], version, at)
            break
    if alias:
        out += _check_process_groups(tree, table, at)
    return _dedupe(out)


def _check_kwargs(call: ast.Call, qualname: str, sig: dict, version: str, at) -> list[Finding]:
    out = []
    for kw in call.keywords:
        if kw.arg is not None and kw.arg not in sig["params"] and not sig["varkw"]:
            out.append(Finding(at(call), f"{qualname} has no parameter {kw.arg!r} in torch-xla {version}"))
    return out


def _check_process_groups(tree: ast.Module, table: dict, at) -> list[Finding]:
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("init_process_group")):
            continue
        args = {k.arg: k.value for k in node.keywords if k.arg}
        backend = node.args[0] if node.args else args.get("backend")
        if isinstance(backend, ast.Constant) and isinstance(backend.value, str):
            if backend.value not in (*table["dist_backends"], *TORCH_BACKENDS):
                out.append(Finding(at(node), f"process-group backend {backend.value!r} is not registered by "
                                             f"torch-xla {table['torch_xla']} (it registers {table['dist_backends']})"))
        method = args.get("init_method")
        if isinstance(method, ast.Constant) and isinstance(method.value, str):
            scheme = method.value.split("://")[0]
            if scheme not in (*table["rendezvous"], *TORCH_RENDEZVOUS):
                out.append(Finding(at(node), f"rendezvous {method.value!r} is not registered by torch-xla "
                                             f"{table['torch_xla']} (it registers {table['rendezvous']})"))
    return out


def check_env(env: dict[str, str], table: dict[str, Any], forbidden: tuple[str, ...] = ()) -> list[Finding]:
    """A launch environment against the torch-xla version's variables and device names."""
    out = []
    version = table["torch_xla"]
    if "PJRT_DEVICE" not in table["env_vars"]:
        out.append(Finding("env", f"torch-xla {version} does not read PJRT_DEVICE"))
    device = env.get("PJRT_DEVICE")
    if device is None:
        out.append(Finding("env", "PJRT_DEVICE is not set: torch-xla would pick a device on its own"))
    elif device.split("_")[0] not in table["pjrt_devices"]:
        out.append(Finding("env", f"PJRT_DEVICE={device}: torch-xla {version} knows {table['pjrt_devices']}"))
    for name, why in table["deprecated_env"].items():
        if name in env:
            out.append(Finding("env", f"{name} is deprecated in torch-xla {version}: {why}"))
    for name in forbidden:
        if name in env and name not in table["deprecated_env"]:
            out.append(Finding("env", f"{name} must not be set for this launch"))
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        if (f.subject, f.message) not in seen:
            seen.add((f.subject, f.message))
            out.append(f)
    return out


# ------------------------------------------------------------------- accelctl plan --check

#: the worker's files (``accelctl/worker/``) that call torch-xla, read as text, never imported
WORKER_XLA_FILES = ("xla_extras.py", "devices.py")


def stored_table(version: str) -> dict[str, Any] | None:
    """The API table shipped for torch-xla ``version`` (major.minor, ``data/torch_xla-X.Y.Z.json``:
    built by ``api_table`` from the release tag, commit inside), or None when none is."""
    for path in sorted((Path(__file__).with_name("data")).glob(f"torch_xla-{version}.*.json")):
        return json.loads(path.read_text(encoding="utf-8"))
    return None


def check_results(plan, version: str, forbidden: tuple[str, ...], asked: tuple[str, ...] = ()) -> list:
    """Each launch's environment and the worker's torch-xla code checked against the API table
    of torch-xla ``version`` (built from its release tag), as ``accelctl plan --check`` reports it.
    ``asked``: deprecated variables the workload sets on purpose (``xla_use_bf16 = on``): each must
    still be one torch-xla reads, and its deprecation is said, not a rejection."""
    from accelctl.backends.findings import CheckResult, not_run

    table = stored_table(version)
    if table is None:
        return [not_run(f"torch-xla {version} API table", f"no table for torch-xla {version} is shipped; build "
                        "one with python -m accelctl.backends.xla_neuron.check")]
    findings = [f for launch in plan.launches for f in check_env(launch.env, table, forbidden)]
    said = [f for f in findings if any(f.message.startswith(f"{name} is deprecated") for name in asked)]
    findings = [f for f in findings if f not in said]
    findings += [Finding("env", f"{name} is set but torch-xla {table['torch_xla']} does not read it")
                 for name in asked if any(name in launch.env for launch in plan.launches)
                 and name not in table["env_vars"] and name not in table["deprecated_env"]]  # read where it warns
    said = [f"{f} -- set because the workload asks for it" for f in _dedupe(said)]
    used: set[str] = set()
    for name in WORKER_XLA_FILES:
        findings += check_worker_source(WORKER_DIR / name, table, used)
    tool = f"torch-xla {table['torch_xla']} API table ({table['source']})"
    return [CheckResult(tool, not findings, [str(f) for f in _dedupe(findings)] + said),
            installed_result(used, version)]


WORKER_DIR = Path(__file__).resolve().parents[2] / "worker"
#: run by the torch-xla venv's python: import each module, look each name up; JSON on stdout
IMPORT_SCRIPT = """
import importlib, json, sys
import torch, torch_xla
out = {"torch": torch.__version__, "torch_xla": torch_xla.__version__, "missing": []}
for dotted in json.load(sys.stdin):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                out["missing"].append(dotted)
                break
            obj = getattr(obj, attr)
        break
    else:
        out["missing"].append(dotted)
print(json.dumps(out))
"""


#: (python, the names) -> what ``_imported`` found: ``plan --check`` of several Neuron targets
#: imports torch-xla once (seconds of CPU each time), not once per target
_IMPORTED: dict[tuple[str, tuple[str, ...]], dict] = {}


def _imported(python: Path, names: tuple[str, ...]) -> dict | str:
    """``IMPORT_SCRIPT``'s answer from ``python`` for ``names``, or why there is none."""
    key = (str(python), names)
    if key not in _IMPORTED:
        env = {**os.environ, "PJRT_DEVICE": "CPU", "TF_CPP_MIN_LOG_LEVEL": "2"}
        try:
            proc = subprocess.run([str(python), "-c", IMPORT_SCRIPT], input=json.dumps(list(names)), env=env,
                                  capture_output=True, text=True, timeout=300)
        except (subprocess.TimeoutExpired, OSError) as exc:
            return f"{python} could not run: {exc}"  # not kept: the next call tries again
        try:
            _IMPORTED[key] = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return f"{python} could not import torch_xla (exit {proc.returncode}): {last}"
    return _IMPORTED[key]


def installed_result(used: set[str], version: str, python: Path | None = None):
    """The worker's torch-xla names (``used``, as ``check_worker_source`` found them) imported
    by the installed torch-xla of ``.venv-xla`` in a subprocess; NOT RUN without that venv."""
    from accelctl.backends.findings import CheckResult, not_run

    from accelctl.backends.xla_neuron.cpu_rehearsal import xla_python, xla_venv

    python = python or xla_python()
    tool = "installed torch-xla (.venv-xla): the worker's names imported"
    if python is None or not python.exists():
        return not_run(tool, f"no complete {xla_venv()}; scripts/setup-xla.sh makes it")
    got = _imported(python, tuple(sorted(used)))
    if isinstance(got, str):
        return CheckResult(tool, False, [got])
    problems = [f"{name} is not in the installed torch-xla {got['torch_xla']}" for name in got["missing"]]
    if not got["torch_xla"].startswith(version + "."):
        problems.append(f"installed torch-xla is {got['torch_xla']}; the plan is written for {version}")
    return CheckResult(f"installed torch-xla {got['torch_xla']} (torch {got['torch']}, .venv-xla): "
                       f"{len(used)} worker names imported", not problems, problems)


if __name__ == "__main__":  # python -m accelctl.backends.xla_neuron.check GIT_DIR@TAG | WHEEL | DIR
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    print(json.dumps(api_table(open_source(sys.argv[1])), indent=1, sort_keys=True))

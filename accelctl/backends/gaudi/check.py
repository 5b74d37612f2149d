"""Check gaudi plans against the real optimum-habana, in its own environment.

    .venv-habana/bin/python -m accelctl.backends.gaudi.check PLAN.json [PLAN.json ...]

(from the repository root; ``scripts/setup-habana.sh`` makes ``.venv-habana``).  Per plan, one
JSON report: gaudi_spawn.py's argv and the command ``DistributedRunner`` builds from it; every
flag passed to an example script (its recorded argparse table, or ``HfArgumentParser`` over the
installed ``GaudiTrainingArguments``); ``gaudi_config.json`` round-tripped through
``GaudiConfig``, unknown keys errors (GaudiConfig accepts them silently).
Exit status 0 when every plan passes.  Nothing here runs on an HPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import shlex
import sys
import tempfile
import types
import typing
from functools import cached_property
from pathlib import Path
from typing import Any

from accelctl import entrypoints

FLAGS_FILE = Path(__file__).with_name("data") / "optimum_habana_flags.json"
SPAWN = "examples/gaudi_spawn.py"
NOTE = "gaudi_spawn.py runs: "
#: the run's free port (``accelctl.contract.plan.FREE_PORT``), an int only when the run starts:
#: parsed as this stand-in
FREE_PORT, STAND_IN_PORT = "{free_port}", "29500"


# --------------------------------------------------------------------------- optimum-habana
def import_optimum_habana():
    """``import optimum.habana`` without its SynapseAI version probe, which shells out to ``pip list``
    and fails where the Habana runtime is absent: pre-import ``optimum.habana.utils`` under a stub
    parent, no-op the probe, then import the real package (LAB §7).
    """
    if "optimum.habana" in sys.modules and hasattr(sys.modules["optimum.habana"], "GaudiConfig"):
        return sys.modules["optimum.habana"]
    try:
        spec = importlib.util.find_spec("optimum.habana")
    except ModuleNotFoundError:  # no optimum at all
        spec = None
    if spec is None:
        raise SystemExit("optimum-habana is not installed in this interpreter; run scripts/setup-habana.sh "
                         "and use .venv-habana/bin/python")
    stub = types.ModuleType("optimum.habana")
    stub.__path__ = list(spec.submodule_search_locations)
    sys.modules["optimum.habana"] = stub
    import optimum.habana.utils as ohu

    ohu.check_synapse_version = lambda: None
    del sys.modules["optimum.habana"]
    import optimum.habana as oh

    return oh


def offline_training_arguments():
    """GaudiTrainingArguments with device setup (HPU runtime, Hub access) replaced."""
    import torch
    from optimum.habana import GaudiTrainingArguments

    class OfflineGaudiTrainingArguments(GaudiTrainingArguments):
        @cached_property
        def _setup_devices(self):
            self._n_gpu = 0
            self.distributed_state = None
            return torch.device("hpu" if self.use_habana else "cpu")

    return OfflineGaudiTrainingArguments


# --------------------------------------------------------------------------- recorded tables
def flags_data() -> dict[str, Any]:
    return json.loads(FLAGS_FILE.read_text(encoding="utf-8"))


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, and takes no abbreviations (a plan spells
    every flag out)."""

    def __init__(self, prog: str):
        super().__init__(prog=prog, add_help=False, allow_abbrev=False)

    def error(self, message):
        raise _Refused(message)


_TYPES = {"int": int, "float": float, "str": str}


def argparse_parser(path: str, table: dict[str, Any]) -> argparse.ArgumentParser:
    """An ArgumentParser with the recorded arguments of a script (same names, actions,
    types, nargs, choices): what the script itself would accept."""
    ap = _Parser(Path(path).name)
    for row in table["options"]:
        kw: dict[str, Any] = {}
        action = row.get("action")
        if action in ("store_true", "store_false", "store_const", "append", "count"):
            kw["action"] = action
        elif action == "BooleanOptionalAction":
            kw["action"] = argparse.BooleanOptionalAction
        # a script's own Action class (e.g. SetTrueOrFalseOrNone) still takes nargs/const
        if "type" in row and kw.get("action") not in ("store_true", "store_false"):
            kw["type"] = _TYPES.get(row["type"], str)
        for key in ("nargs", "choices", "const", "required"):
            if key in row and row[key] is not None and kw.get("action") not in ("store_true", "store_false"):
                kw[key] = row[key]
        if "default" in row:
            kw["default"] = row["default"]
        ap.add_argument(*row["names"], **kw)
    for row in table.get("positionals", []):
        kw = {}
        if row.get("nargs") == "REMAINDER":
            kw["nargs"] = argparse.REMAINDER
        elif row.get("nargs") is not None:
            kw["nargs"] = row["nargs"]
        ap.add_argument(row["names"][0], **kw)
    return ap


_ANNOTATIONS = {"Optional": typing.Optional, "List": typing.List, "Union": typing.Union, "Literal": typing.Literal,
                "Dict": typing.Dict, "str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict}


def script_dataclasses(table: dict[str, Any]) -> list[type]:
    """The script's own argument dataclasses, rebuilt from the recorded fields."""
    out = []
    for name, rows in table["dataclasses"].items():
        required, optional = [], []
        for row in rows:
            try:
                tp = eval(row["annotation"], {"__builtins__": {}}, _ANNOTATIONS)  # noqa: S307 - recorded type names
            except Exception:  # an annotation we cannot name: it parses as a string
                tp = typing.Optional[str]
            meta = {"choices": row["choices"]} if row.get("choices") else {}
            if row.get("required"):
                required.append((row["name"], tp, dataclasses.field(metadata=meta)))
            else:
                default = None if row.get("default_factory") else row.get("default")
                optional.append((row["name"], tp, dataclasses.field(default=default, metadata=meta)))
        out.append(dataclasses.make_dataclass(name, required + optional))
    return out


# --------------------------------------------------------------------------- checks
@dataclasses.dataclass
class Report:
    plan: str
    ok: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "ok": self.ok, "errors": self.errors, "passed": not self.errors}


def spawn_join(words: list[str]) -> str:
    """How gaudi_spawn.py turns SCRIPT ARGS into the command DistributedRunner hands to
    ``bash -c`` (examples/gaudi_spawn.py main(): arguments with a space, not already
    quoted, are wrapped in double quotes; the rest are joined as they are)."""
    return " ".join(f'"{a}"' if " " in a and a[0] != '"' and a[-1] != '"' else a for a in words)


def _words(command: str) -> list[str]:
    """A DistributedRunner command as words, host-specific parts masked: the interpreter
    path is ``python``; mpirun's ``--map-by X:PE=N`` depends on the host's lscpu."""
    out = []
    for w in shlex.split(command):
        if w == sys.executable:
            w = "python"
        w = re.sub(r"^\w+:PE=\d+$", "<map-by>", w)
        out.append(w)
    return out


def check_spawn(argv: list[str], notes: list[str], rep: Report) -> tuple[str, list[str]] | None:
    """gaudi_spawn.py's argv; returns (script, script args) when it parses."""
    from optimum.habana.distributed import DistributedRunner

    table = flags_data()["scripts"][SPAWN]
    try:
        ns = argparse_parser(SPAWN, table).parse_args(argv)
    except _Refused as exc:
        rep.errors.append(f"gaudi_spawn.py rejects {shlex.join(argv)}: {exc}")
        return None
    rep.ok.append(f"gaudi_spawn.py parses: world_size={ns.world_size} use_deepspeed={ns.use_deepspeed} "
                  f"use_mpi={ns.use_mpi}")
    words = [ns.training_script, *ns.training_script_args]
    command = spawn_join(words)
    if shlex.split(command) != words:
        rep.errors.append(f"gaudi_spawn.py's bash line {command!r} splits into {shlex.split(command)}, "
                          f"not the plan's {words}")
    runner = DistributedRunner(command_list=[command], world_size=ns.world_size, hostfile=ns.hostfile,
                               use_mpi=ns.use_mpi, use_deepspeed=ns.use_deepspeed, master_port=ns.master_port)
    theirs = _words(runner._interpreter + command)
    ours = next((n[len(NOTE):] for n in notes if n.startswith(NOTE)), None)
    if ours is None:
        rep.errors.append("the plan does not say what gaudi_spawn.py runs (no 'gaudi_spawn.py runs:' note)")
    else:
        mine = [re.sub(r"^\w+:PE=<cores/rank>$", "<map-by>", w) for w in shlex.split(ours)]
        if mine[-1:] == ["..."]:  # the note abbreviates the script's arguments
            theirs = theirs[: len(mine) - 1] + ["..."]
        if mine != theirs:
            rep.errors.append(f"DistributedRunner builds {' '.join(theirs)!r}; the plan says {' '.join(mine)!r}")
        else:
            rep.ok.append(f"DistributedRunner builds what the plan says: {' '.join(theirs)}")
    return ns.training_script, list(ns.training_script_args)


def check_argparse_script(path: str, args: list[str], rep: Report) -> None:
    table = flags_data()["scripts"][path]
    known = {n for row in table["options"] for n in row["names"]}
    known |= {"--no-" + n[2:] for row in table["options"] if row.get("action") == "BooleanOptionalAction"
              for n in row["names"]}
    unknown = [a for a in args if a.startswith("--") and a.split("=", 1)[0] not in known]
    if unknown:
        rep.errors.append(f"{Path(path).name} has no flag {', '.join(unknown)}")
    try:
        argparse_parser(path, table).parse_args(args)
        rep.ok.append(f"{Path(path).name} parses {len([a for a in args if a.startswith('--')])} flags")
    except _Refused as exc:
        rep.errors.append(f"{Path(path).name} rejects its arguments: {exc}")


def check_training_script(path: str, args: list[str], env: dict[str, str], files: dict[str, str],
                          rep: Report) -> None:
    from transformers import HfArgumentParser

    table = flags_data()["scripts"][path]
    classes = [*script_dataclasses(table), offline_training_arguments()]
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.replace("{run_dir}", tmp) for a in args]
        for name, content in files.items():
            Path(tmp, name).write_text(content, encoding="utf-8")
        saved = dict(os.environ)
        os.environ.update(env)  # GaudiTrainingArguments reads PT_HPU_LAZY_MODE in __post_init__
        try:
            parsed = HfArgumentParser(classes).parse_args_into_dataclasses(args=args)
            derived = {k: v for k, v in os.environ.items() if k.startswith("FSDP_") or k == "ACCELERATE_USE_FSDP"}
        except (ValueError, TypeError, AssertionError, SystemExit) as exc:
            rep.errors.append(f"{Path(path).name}: HfArgumentParser/GaudiTrainingArguments reject the "
                              f"arguments: {exc}")
            return
        finally:
            os.environ.clear()
            os.environ.update(saved)
    check_data_files(path, parsed[:-1], table, rep)
    targs = parsed[-1]
    if "fsdp_config.json" in files:
        check_fsdp(json.loads(files["fsdp_config.json"]), derived, targs, rep)
    rep.ok.append(f"{Path(path).name}: GaudiTrainingArguments accepts use_habana={targs.use_habana} "
                  f"use_lazy_mode={targs.use_lazy_mode} use_hpu_graphs_for_training="
                  f"{targs.use_hpu_graphs_for_training} bf16={targs.bf16} max_grad_norm={targs.max_grad_norm}")
    fused = json.loads(files.get("gaudi_config.json", "{}")).get("use_fused_clip_norm")
    if fused is not None and fused != bool(targs.max_grad_norm and targs.max_grad_norm > 0):
        rep.errors.append(f"gaudi_config.json: use_fused_clip_norm={fused} but the Trainer clips at {targs.max_grad_norm}")
    # GaudiTrainingArguments._setup_devices (replaced above, it needs the HPU runtime) refuses
    # eager mode unless the bridge was started with PT_HPU_LAZY_MODE=0 (training_args.py)
    if targs.use_habana and not targs.use_lazy_mode and not targs.torch_compile and env.get(
            "PT_HPU_LAZY_MODE", "1") != "0":
        rep.errors.append("use_lazy_mode=False needs PT_HPU_LAZY_MODE=0 in the environment")
    if targs.use_lazy_mode and env.get("PT_HPU_LAZY_MODE") == "0":
        rep.errors.append("--use_lazy_mode with PT_HPU_LAZY_MODE=0: the bridge runs eager")


def check_fsdp(config: dict[str, Any], derived: dict[str, str], targs, rep: Report) -> None:
    """What GaudiTrainingArguments.__post_init__ hands accelerate's FSDP (its ``FSDP_*``
    variables) is what the plan's fsdp_config.json says."""
    strategy = {1: "FULL_SHARD", 2: "SHARD_GRAD_OP"}[config["fsdp_sharding_strategy"]]
    from accelerate.utils.constants import FSDP_SHARDING_STRATEGY

    want = {"ACCELERATE_USE_FSDP": "true",
            "FSDP_SHARDING_STRATEGY": str(FSDP_SHARDING_STRATEGY.index(strategy) + 1),
            "FSDP_TRANSFORMER_CLS_TO_WRAP": config["transformer_layer_cls_to_wrap"],
            "FSDP_OFFLOAD_PARAMS": "true" if config["fsdp_offload_params"] else None}
    wrong = [f"{k}={derived.get(k)!r}, the plan means {v!r}" for k, v in want.items() if derived.get(k) != v]
    if targs.fsdp_config.get("activation_checkpointing") != config["fsdp_activation_checkpointing"]:
        wrong.append(f"activation_checkpointing={targs.fsdp_config.get('activation_checkpointing')!r}")
    if wrong:
        rep.errors.append("GaudiTrainingArguments' FSDP settings differ from fsdp_config.json: " + "; ".join(wrong))
    else:
        rep.ok.append(f"GaudiTrainingArguments hands accelerate FSDP {strategy}, wrapping "
                      f"{config['transformer_layer_cls_to_wrap']}, offload {bool(config['fsdp_offload_params'])}")


def check_data_files(path: str, parsed: list, table: dict, rep: Report) -> None:
    """The script's own data file check (its ``DataTrainingArguments.__post_init__``, recorded as
    ``file_extensions``): each data file's extension, ``value.split(".")[-1]``, in the list."""
    for name, allowed in table.get("file_extensions", {}).items():
        value = next((getattr(d, name) for d in parsed if getattr(d, name, None)), None)
        if value is None:
            continue
        if value.split(".")[-1] not in allowed:
            rep.errors.append(f"{Path(path).name}: `{name}` should be a {' or a '.join(allowed)} file, not {value}")
        else:
            rep.ok.append(f"{Path(path).name}: --{name} {value} passes the script's extension check ({', '.join(allowed)})")


def check_gaudi_config(text: str, rep: Report) -> None:
    from optimum.habana import GaudiConfig

    data = json.loads(text)
    known = set(vars(GaudiConfig()))
    unknown = sorted(set(data) - known)
    if unknown:
        rep.errors.append(f"gaudi_config.json: GaudiConfig does not know {', '.join(unknown)} "
                          f"(it would ignore them silently; known: {', '.join(sorted(known))})")
    cfg = GaudiConfig.from_dict(data)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "gaudi_config.json").write_text(text, encoding="utf-8")
        loaded = GaudiConfig.from_pretrained(tmp)
    for key in set(data) & known:
        for how, obj in (("from_dict", cfg), ("from_pretrained", loaded)):
            if getattr(obj, key) != data[key]:
                rep.errors.append(f"gaudi_config.json: {key}={data[key]!r} reads back as {getattr(obj, key)!r} "
                                  f"with GaudiConfig.{how}")
    rep.ok.append(f"gaudi_config.json loads with GaudiConfig.from_dict and from_pretrained: {json.dumps(data)}")


def check_plan(plan: dict[str, Any], name: str = "") -> Report:
    rep = Report(name or f"{plan.get('workload')}/{plan.get('target')}")
    if plan.get("backend") != "gaudi":
        rep.errors.append(f"not a gaudi plan (backend {plan.get('backend')})")
        return rep
    files = {f["path"]: f["content"] for f in plan["files"]}
    scripts = flags_data()["scripts"]
    for launch in plan["launches"]:
        argv = [a.replace(FREE_PORT, STAND_IN_PORT) for a in launch["argv"]]
        env, cwd = dict(launch["env"]), launch.get("cwd", "")
        lazy = env.get("PT_HPU_LAZY_MODE")
        if lazy not in ("0", "1"):
            rep.errors.append(f"{launch['name']}: PT_HPU_LAZY_MODE must be 0 or 1, not {lazy!r}")
        if argv[0] != "python":
            rep.errors.append(f"{launch['name']}: expected a python command, got {argv[0]}")
            continue
        if argv[1:3] == ["-m", entrypoints.WORKER]:
            rep.ok.append("single card: accelctl's worker runs directly")
            continue
        script, args = argv[1], argv[2:]
        if Path(script).name == "gaudi_spawn.py":
            got = check_spawn(args, [n.replace(FREE_PORT, STAND_IN_PORT) for n in plan.get("notes", [])], rep)
            if got is None:
                continue
            script, args = got
        if Path(script).name == "accelctl_worker.py":
            if "accelctl_worker.py" not in files:
                rep.errors.append("the worker shim accelctl_worker.py is not among the plan's files")
            elif args != ["{run_dir}/job.json"]:
                rep.errors.append(f"the worker shim takes the job file only, not {args}")
            else:
                rep.ok.append("gaudi_spawn.py starts accelctl's worker through accelctl_worker.py")
            continue
        folder = cwd.replace("{optimum_habana}/", "", 1)
        path = f"{folder}/{Path(script).name}"
        if path not in scripts:
            rep.errors.append(f"{path}: no recorded flags for this script (regenerate data/optimum_habana_flags.json)")
            continue
        if scripts[path]["kind"] == "argparse":
            check_argparse_script(path, args, rep)
        else:
            check_training_script(path, args, env, files, rep)
    if "gaudi_config.json" in files:
        check_gaudi_config(files["gaudi_config.json"], rep)
    return rep


# --------------------------------------------------------------------------- from accelctl plan --check

#: the repository (or site-packages) root holding ``accelctl``: the habana venv imports it from here
ROOT = Path(__file__).resolve().parents[3]


def habana_python() -> Path:
    """The interpreter of optimum-habana's own environment (``$HABANA_VENV`` or ``.venv-habana``)."""
    return Path(os.environ.get("HABANA_VENV", ROOT / ".venv-habana")) / "bin" / "python"


def check_results(plan):
    """``plan`` (a ``Plan``) checked by this module's ``main`` in optimum-habana's environment, as
    ``accelctl plan --check`` reports it; not run when that environment does not exist."""
    import subprocess

    from accelctl.backends.findings import CheckResult, not_run

    py = habana_python()
    if not py.exists():
        return [not_run("optimum-habana", f"no {py}: run scripts/setup-habana.sh")]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(plan.to_json())
    try:
        cp = subprocess.run([str(py), "-m", __name__, fh.name], capture_output=True,
                            text=True, timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.unlink(fh.name)
    try:
        report = json.loads(cp.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [CheckResult("optimum-habana", False, (cp.stderr.strip().splitlines() or ["no report"])[-3:])]
    tool = f"optimum-habana {report.get('optimum_habana', '')}".strip()
    return [CheckResult(tool, bool(report["passed"]), report["errors"])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m accelctl.backends.gaudi.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("plans", nargs="+", help="plan JSON files (a run folder's plan.json, or the output of "
                    "accelctl plan --json: each plan in it)")
    args = ap.parse_args(argv)
    oh = import_optimum_habana()
    failed = 0
    for path in args.plans:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        # ``accelctl plan --json`` is a document (accelctl.reply) holding the plans of the file
        plans = [p["plan"] for p in data["result"].get("plans", []) if "plan" in p] if "result" in data else [data]
        for plan in plans:
            rep = check_plan(plan, name=path)
            out = rep.to_dict()
            out["optimum_habana"] = getattr(oh, "__version__", "")
            out["flags_source"] = flags_data()["source"]
            print(json.dumps(out, sort_keys=True))
            failed += bool(rep.errors)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""optimum-neuron's interfaces the Neuron plans use, read with ``ast`` from its wheel.

optimum-neuron imports neuronx-distributed and the Neuron compiler at import time, so its source
is read instead (``WheelSource``) into a small table: ``export`` (the flags of ``optimum-cli
export neuron``), ``training_args`` (``NeuronTrainingArguments``' fields), ``inference`` /
``training`` (the model types registered per task), ``dropped_export_kwargs`` (what the exporter
pops for NxD decoders), and ``examples`` (the example scripts' arguments, with their commit).
``python -m accelctl.backends.xla_neuron.optimum_table WHEEL > data/optimum_neuron-0.4.5.json``
rebuilds it (the examples part is kept from the stored file).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

VERSION = "0.4.5"
DATA = Path(__file__).with_name("data") / f"optimum_neuron-{VERSION}.json"
EXPORT_CLI = "optimum/commands/export/neuronx.py"
TRAINING_ARGS = "optimum/neuron/trainers/training_args.py"
INFERENCE_MODELS = "optimum/neuron/models/inference/auto_models.py"
TRAINING_MODELS = "optimum/neuron/models/training/auto_models.py"
EXPORTER_MAIN = "optimum/exporters/neuron/__main__.py"
INSTANCES = "optimum/neuron/utils/instance.py"


def _const(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return ast.unparse(node)


def export_flags(src: str) -> dict[str, dict[str, Any]]:
    """``--flag`` -> {dest, default, choices, type, action, required} of every add_argument."""
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(ast.parse(src)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        dest = _const(kw.get("dest")) or max(names, key=len).lstrip("-").replace("-", "_")
        info = {"dest": dest, "default": _const(kw.get("default")), "choices": _const(kw.get("choices")),
                "type": ast.unparse(kw["type"]) if "type" in kw else None, "action": _const(kw.get("action")),
                "required": bool(_const(kw.get("required"))) if "required" in kw else False}
        for name in names:
            out[name] = info
    return out


def dataclass_fields(src: str, cls: str) -> dict[str, Any]:
    """Field -> default of dataclass ``cls`` (``field(default=...)`` or a plain default)."""
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            out = {}
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    v = st.value
                    if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "field":
                        kw = {k.arg: k.value for k in v.keywords}
                        v = kw.get("default")
                    out[st.target.id] = _const(v)
            return out
    raise ValueError(f"no class {cls}")


def registered(src: str, function: str) -> dict[str, list[str]]:
    """task -> model types registered through ``function(model_type, task)`` (decorator or call)."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == function and len(node.args) == 2:
            model_type, task = (_const(a) for a in node.args)
            out.setdefault(task, []).append(model_type)
    return {task: sorted(set(types)) for task, types in sorted(out.items())}


def dropped_export_kwargs(src: str) -> list[str]:
    """The keywords ``maybe_export_from_neuron_model_class`` pops before exporting a decoder."""
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef) and node.name == "maybe_export_from_neuron_model_class":
            return [_const(c.args[0]) for c in ast.walk(node) if isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Attribute) and c.func.attr == "pop"
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == "kwargs"]
    return []


def module_constant(src: str, name: str) -> Any:
    """The literal value of a module-level ``name = ...``."""
    for st in ast.parse(src).body:
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
            return _const(st.value)
    return None


def build_table(source) -> dict[str, Any]:
    """The table of an optimum-neuron source (a ``WheelSource`` / ``DirSource``)."""
    return {
        "optimum_neuron": source.version, "source": source.label,
        "export": export_flags(source.read(EXPORT_CLI)),
        "training_args": dataclass_fields(source.read(TRAINING_ARGS), "NeuronTrainingArguments"),
        "inference": registered(source.read(INFERENCE_MODELS), "register_neuron_model_for_inference"),
        "training": registered(source.read(TRAINING_MODELS), "register_neuron_model_for_training"),
        "dropped_export_kwargs": dropped_export_kwargs(source.read(EXPORTER_MAIN)),
        "instance_types": module_constant(source.read(INSTANCES), "SUPPORTED_INSTANCE_TYPES"),
    }


def stored() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    from accelctl.backends.xla_neuron.check import open_source

    src = open_source(argv[0])
    if not hasattr(src, "version") or src.version in ("", "unknown"):
        print("cannot tell the optimum-neuron version of", argv[0], file=sys.stderr)
        return 2
    table = build_table(src)
    if DATA.exists():
        table["examples"] = stored().get("examples", {})
    print(json.dumps(table, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

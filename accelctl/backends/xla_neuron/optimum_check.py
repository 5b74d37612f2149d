"""Check a Neuron plan that runs optimum-neuron's programs against optimum-neuron's own
interfaces: the table read from its wheel (``optimum_table``), turned back into parsers.

``optimum-cli export neuron`` (its recorded argparse table; the instance type; no flag the
exporter drops for NxD decoders), ``finetune_llama.py`` (fields of ``NeuronTrainingArguments``
and the script's arguments; tp x pp divides the processes) and ``generation.py`` (its recorded
flags).  optimum-neuron does not import here: this checks its source's interface, not a run.
"""

from __future__ import annotations

import argparse
from typing import Any

from accelctl.backends.findings import CheckResult
from accelctl.backends.xla_neuron.optimum_plans import EXPORT_DIR, GENERATE_EXAMPLE, TRAIN_EXAMPLE
from accelctl.backends.xla_neuron.optimum_table import VERSION, stored

_TYPES = {"int": int, "float": float}


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # never exit: the check reports it
        raise _Refused(message)


def export_parser(flags: dict[str, dict[str, Any]], instance_types: list[str]) -> argparse.ArgumentParser:
    ap = _Parser(prog="optimum-cli export neuron", add_help=False)
    by_dest: dict[str, list[str]] = {}
    for name, info in flags.items():
        # the names of one add_argument call share dest, action and type (-m / --model)
        by_dest.setdefault(f"{info['dest']}|{info['action']}|{info['type']}|{info['choices']}", []).append(name)
    for names in by_dest.values():
        info = flags[names[0]]
        kw: dict[str, Any] = {}
        if info["action"]:
            kw["action"] = info["action"]
        else:
            kw["type"] = _TYPES.get(info["type"] or "", str)
            choices = info["choices"]
            if choices == "SUPPORTED_INSTANCE_TYPES":
                choices = instance_types
            if isinstance(choices, list):
                kw["choices"] = choices
        if names == ["output"]:
            ap.add_argument("output", **kw)
            continue
        ap.add_argument(*names, dest=info["dest"], required=bool(info["required"]), **kw)
    return ap


def training_parser(fields: dict[str, Any], script_fields: dict[str, Any]) -> argparse.ArgumentParser:
    """HfArgumentParser's reading of the dataclasses, by their defaults' types."""
    ap = _Parser(prog=TRAIN_EXAMPLE, add_help=False)
    for name, default in {**fields, **script_fields}.items():
        if isinstance(default, bool):
            ap.add_argument(f"--{name}", nargs="?", const=True, type=_bool)
        elif isinstance(default, int):
            ap.add_argument(f"--{name}", type=int)
        elif isinstance(default, float):
            ap.add_argument(f"--{name}", type=float)
        else:
            ap.add_argument(f"--{name}", required=name in script_fields and default is None)
    return ap


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("true", "yes", "1", "t", "y"):
        return True
    if low in ("false", "no", "0", "f", "n"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean")


def _after(argv: tuple[str, ...], word_end: str) -> list[str] | None:
    for i, word in enumerate(argv):
        if word.endswith(word_end):
            return list(argv[i + 1:])
    return None


def check_optimum_plan(plan) -> CheckResult:
    table = stored()
    tool = f"optimum-neuron {VERSION} (its interfaces read from {table['source']})"
    ok: list[str] = []
    errors: list[str] = []
    for launch in plan.launches:
        argv = tuple(launch.argv)
        try:
            if argv[:3] == ("optimum-cli", "export", "neuron"):
                ns = export_parser(table["export"], table["instance_types"]).parse_args(list(argv[3:]))
                dropped = [f for f in table["dropped_export_kwargs"] if getattr(ns, f, None) not in (None, False)
                           and f"--{f}" in argv]
                if dropped:
                    errors.append(f"export: {', '.join(dropped)} passed, but the exporter drops them for NxD decoders")
                if str(ns.output) != EXPORT_DIR:
                    errors.append(f"export: writes {ns.output}, the run reads {EXPORT_DIR}")
                ok.append(f"export parses: --model {ns.model} --instance_type {ns.instance_type} --batch_size "
                          f"{ns.batch_size} --sequence_length {ns.sequence_length} --tensor_parallel_size "
                          f"{ns.tensor_parallel_size}")
            elif (args := _after(argv, TRAIN_EXAMPLE)) is not None:
                script = table["examples"][TRAIN_EXAMPLE]
                ns = training_parser(table["training_args"], script["script_fields"]).parse_args(args)
                procs = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--nproc_per_node=")), 0)
                split = ns.tensor_parallel_size * ns.pipeline_parallel_size
                if procs % split:
                    errors.append(f"finetune_llama.py: tp {ns.tensor_parallel_size} x pp {ns.pipeline_parallel_size} "
                                  f"does not divide the {procs} processes")
                ok.append(f"finetune_llama.py parses as NeuronTrainingArguments: tensor_parallel_size "
                          f"{ns.tensor_parallel_size}, pipeline_parallel_size {ns.pipeline_parallel_size}, zero_1 "
                          f"{ns.zero_1}, bf16 {bool(ns.bf16)} over {procs} processes")
            elif (args := _after(argv, GENERATE_EXAMPLE)) is not None:
                flags = table["examples"][GENERATE_EXAMPLE]["flags"]
                ap = _Parser(prog=GENERATE_EXAMPLE, add_help=False)
                for name, info in flags.items():
                    if info.get("positional"):
                        ap.add_argument(name)
                    else:
                        ap.add_argument(name, type=_TYPES.get(info.get("type", ""), str))
                ns = ap.parse_args(args)
                if ns.model != EXPORT_DIR:
                    errors.append(f"generation.py loads {ns.model}, not the export {EXPORT_DIR}")
                ok.append(f"generation.py parses: --length {ns.length}")
        except _Refused as exc:
            errors.append(f"{launch.name}: rejected: {exc}")
    if not ok and not errors:
        errors.append("no optimum-neuron command in the plan")
    return CheckResult(tool, not errors, errors or ok)

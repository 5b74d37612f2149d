"""``accelctl init [MODEL] [-t TARGET ...]``: a commented workload that validates, to start from.

MODEL is a family (``llama``: its tiny architecture, which runs anywhere), a Hub id the
catalog knows (``bigscience/bloomz-7b1``: its real shape), or any other Hub id or local model
folder, whose shape comes from its ``config.json`` (``--config PATH``, the folder, or the HF
cache) -- else the family named with ``--family`` or read from the id, and the file says that
plan and estimate use the stand-in's sizes until a config is given.

Every target is planned before the file is written: one that does not fit as first written
gets the first fix ``plan``'s refusal offers (``accelctl.plan.fixes``: each one planned; a
one-device target is first put on a node's 8), and one that still cannot run says why in a
comment above it, in ``plan``'s words.  A ``cpu`` target
is always there, so ``accelctl run FILE -t cpu`` works on this machine.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from accelctl import exitcodes
from accelctl.errors import AccelctlError

#: the training tasks (an optimizer and a batch)
TRAINING = ("pretrain", "finetune")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("init")
    p.add_argument("model", nargs="?", default="gpt2",
                   help="a family (llama, bert, vit, ...), a Hub id or a local model folder (default: gpt2, tiny)")
    p.add_argument("-t", "--target", action="append", default=[], metavar="DEVICE|INSTANCE",
                   help="a device kind (h100, gaudi2, trn1, ...) or an instance (p5.48xlarge, ...); repeatable; "
                        "a cpu target is always added")
    p.add_argument("--task", help="pretrain, finetune, generate or infer (default: the model's usual one)")
    p.add_argument("--family", help="the architecture family of a Hub model the catalog does not know")
    p.add_argument("--config", metavar="PATH", help="the model's config.json (or its folder) for its real shape")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: NAME.wl here; - for stdout)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout: the file written, its "
                   "workload and each target's verdict (with -o -: the text too)")
    return p


def usage(message: str) -> AccelctlError:
    return AccelctlError(f"init: {message}", exit_code=exitcodes.USAGE)


# ------------------------------------------------------------------ what the file says

@dataclass
class Model:
    family: str
    #: the model line and its block's lines
    line: str
    block: list[str] = field(default_factory=list)
    comment: str = ""
    hub: bool = False
    #: context length the real model takes (tokens) where known
    context: int = 0
    #: the real architecture is known (a family's own tiny one, the catalog's, a config.json)
    shape_known: bool = True
    shape: dict = field(default_factory=dict)
    #: how the file's description names the model (a local folder: its path as written) and
    #: the stem of the workload's name; both default to what was asked for
    label: str = ""
    stem: str = ""


def resolve_model(ref: str, family: str | None, config: str | None, out_dir: Path) -> Model:
    from accelctl.models.catalog import FAMILIES, KNOWN_MODELS, WRITTEN

    if ref in WRITTEN and not config:
        fam = FAMILIES[ref]
        # the sizes a reader changes first; a family without them (stable_diffusion) takes its defaults
        shape = ", ".join(f"{k} = {_value(v)}" for k, v in fam.shape.items() if k in ("layers", "hidden", "heads")
                          and "layers" in fam.shape)
        return Model(ref, f"model {ref}({shape})", comment=f"a tiny {ref} (random weights): write its real sizes "
                     "here, or name a Hub id: model hf(\"org/name\") { family = " + ref + " }",
                     shape=dict(fam.shape))
    known = KNOWN_MODELS.get(ref)
    if known is not None:
        return Model(known.family, f'model hf("{ref}")', hub=True, context=known.seq_len, shape=dict(known.shape),
                     comment=f"the catalog's {ref}: its real shape plans and estimates; the cpu target runs a "
                             "tiny stand-in of it")
    from accelctl.language.check_common import HUB_ID

    folder = _model_folder(ref)
    if folder is None and not HUB_ID.fullmatch(ref):
        raise usage(f"{ref!r}: not a family, a Hub id (OWNER/NAME of letters, digits, '_', '-', '.') or a model "
                    "folder here")
    cfg_path = _config_for(ref, folder, config, out_dir)
    if cfg_path is not None:
        fam, shape = _shape_from(cfg_path)
        if family and family != fam:
            raise usage(f"--family {family}: {cfg_path} says model_type {fam}")
        where = _written(ref, folder, out_dir) if folder is not None else ""
        rel = (_written(config, cfg_path, out_dir) if config else f"{where.rstrip('/')}/config.json" if where
               else _relative(cfg_path, out_dir))
        comment = f"shape from {rel}: plan and estimate use the real model"
        if folder is not None:
            block = [f"config = {_string(rel)}"] if config else []
            return Model(fam, f"model local({_string(where)})", block, hub=True,
                         context=int(shape.get("max_positions") or 0), shape=shape, comment=comment,
                         label=where, stem=folder.name)
        named = [] if FAMILIES[fam].from_module else [f"family = {fam}"]  # never written: its config says
        return Model(fam, f'model hf("{ref}")', [*named, f"config = {_string(rel)}"], hub=True,
                     context=int(shape.get("max_positions") or 0), shape=shape, comment=comment)
    if folder is not None:
        raise usage(f"{ref}: no config.json in this model folder; give --config PATH (the model's config.json)")
    fam = family or _family_in_name(ref)
    if fam is None:
        raise usage(f"{ref!r}: no config.json here (--config PATH, the model's folder, or the HF cache) and no "
                    f"family in its name; name it with --family ({', '.join(WRITTEN)})")
    if fam not in WRITTEN:
        raise usage(f"--family {fam}: not a family accelctl builds ({', '.join(WRITTEN)})")
    return Model(fam, f'model hf("{ref}")', [f"family = {fam}"], hub=True, shape=dict(FAMILIES[fam].shape),
                 shape_known=False, comment="no config.json here: an accelerator target needs the real shape "
                 "(config = \"PATH/config.json\", or the HF cache); the cpu target runs a tiny stand-in")


def _model_folder(ref: str) -> Path | None:
    """The local model folder ``ref`` names, or None where it names none (a Hub id); a path
    that names nothing, or a file, is refused."""
    from accelctl.language.check_common import HUB_ID

    local = Path(ref).expanduser()
    if local.is_dir():
        return local.resolve()
    if ref.startswith(("/", "./", "../", "~")) or ref in (".", "..") or not HUB_ID.fullmatch(ref) and "/" in ref:
        raise usage(f"{ref}: " + ("a file, not a model folder (a folder holding config.json and the weights)"
                                  if os.path.lexists(local) else "no such model folder"))
    return None


def _config_for(ref: str, folder: Path | None, config: str | None, out_dir: Path) -> Path | None:
    if config:
        p = Path(config).expanduser()
        p = p / "config.json" if p.is_dir() else p
        if not os.path.lexists(p):
            raise usage(f"--config {config}: no such file")
        return p.absolute()
    if folder is not None:
        p = folder / "config.json"
        return p if os.path.lexists(p) else None
    from accelctl.models import hf_config

    try:
        return hf_config.find(ref, "hub", out_dir, online=False)
    except (hf_config.ConfigError, ImportError):
        return None


def _shape_from(path: Path) -> tuple[str, dict]:
    """(family, shape) of a config.json, as validate, plan and estimate read it: a file they
    would refuse (E426) is refused here, in the same words."""
    from accelctl.models import hf_config, module_family

    try:
        try:
            return hf_config.load(path)
        except hf_config.UnknownModelType:  # as validate reads it: from transformers' own class
            family, shape = module_family.load(path)
            shape.pop("stand_in")
            return family, shape
    except hf_config.ConfigError as exc:
        raise usage(str(exc)) from None


def _relative(path: Path, out_dir: Path) -> str:
    """``path`` as the written file names it: relative to its folder where it lies below it."""
    try:
        return path.resolve().relative_to(out_dir.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _written(given: str, path: Path, out_dir: Path) -> str:
    """A path the user gave (a model folder, --config), as the written file names it: relative
    to the file's folder (workload paths are), unless it was given absolute and lies elsewhere;
    never with a leading '-' (a flag, E216) nor a control character (no one-line string holds it)."""
    from accelctl.language.values import control_character

    if Path(given).expanduser().is_absolute():
        text = _relative(path, out_dir)
    else:
        text = Path(os.path.relpath(path.resolve(), out_dir.resolve())).as_posix()
    bad = control_character(text, lines=False)
    if bad:
        raise usage(f"{text!r}: a path with a control character ({bad}) cannot be written in a workload")
    return f"./{text}" if text.startswith("-") else text


def _string(text: str) -> str:
    """``text`` as a string of the language (quotes and backslashes escaped)."""
    from accelctl.dsl import ast
    from accelctl.errors import Span

    return ast.value_text(ast.Str(text, Span.point(1, 1)))


def _family_in_name(ref: str) -> str | None:
    from accelctl.models.catalog import WRITTEN

    low = ref.lower().replace("-", "_")
    for name in sorted(WRITTEN, key=len, reverse=True):  # mixtral before mistral's prefix, gpt_neox before gpt2
        if name in low:
            return name
    return None


def _value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v).lower() if isinstance(v, bool) else str(v)


def _identifier(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text.rsplit("/", 1)[-1]).strip("_").lower()
    return name if name and not name[0].isdigit() else f"m_{name}"


def task_lines(family: str, task: str, model: Model) -> tuple[list[str], list[str]]:
    """(task and dataset lines, optimizer/batch lines) of the workload."""
    from accelctl.models.catalog import FAMILIES

    fam = FAMILIES[family]
    seq = min(512, model.context) if model.context else 128
    if family == "stable_diffusion" or fam.library == "diffusers":
        return ([f"task {task} {{ batch_size = 1  inference_steps = 25 steps }}", "dataset synthetic"], [])
    if task == "generate":
        return (["task generate {",
                 '  prompt         = "Accelerators compared:"',
                 "  max_new_tokens = 32 tokens",
                 "  decoding       = greedy",
                 "  kv_cache       = on",
                 "  batch_size     = 1",
                 "}"], [])
    if fam.image_input:
        data = (f"dataset synthetic(image_size = {int(model.shape.get('image_size', 32))}, channels = 3, "
                f"classes = {int(model.shape.get('classes', 10))})")
        task_line = f"task {task} {{ objective = classification }}" if task in TRAINING else \
            f"task {task} {{ batch_size = 8 }}"
    else:
        data = f"dataset synthetic(seq_len = {seq} tokens)       # or hf(\"org/dataset\") / files(\"data.jsonl\")"
        task_line = f"task {task}" + (" { batch_size = 8 }" if task == "infer" else "")
    training = ["optimizer adamw(lr = " + ("0.0001" if model.hub else "0.001") + ", weight_decay = 0.01, "
                "grad_clip = 1.0)", "batch { micro = 8 }"] if task in TRAINING else []
    return [task_line, data], training


# ------------------------------------------------------------------ targets

@dataclass
class Target:
    name: str
    lines: list[str]
    comment: str = ""


def base_target(value: str) -> Target:
    from accelctl.catalog import DEVICES, INSTANCES

    if value in INSTANCES:
        inst = INSTANCES[value]
        return Target(_identifier(value), [f"instance = {value}"],
                      f"{inst.devices} x {inst.device}" + (f", {inst.price_per_hour:g} usd/h" if inst.price_per_hour
                                                          else ""))
    if value in DEVICES:
        dev = DEVICES[value]
        if dev.host:
            return Target(_identifier(value), ["devices = 1", "precision = fp32"], "this machine: the stand-in")
        return Target(_identifier(value), [f"device = {value}", "devices = 1"], f"1 x {value}")
    raise usage(f"-t {value}: not a device kind or an instance of the catalog (devices: {', '.join(DEVICES)}; "
                f"instances: {', '.join(INSTANCES)})")


def _described(target: Target) -> str:
    """The comment of a target whose lines changed: its devices as now written."""
    n = next((ln.split("= ", 1)[1] for ln in target.lines if ln.startswith("devices = ")), None)
    dev = next((ln.split("= ", 1)[1] for ln in target.lines if ln.startswith("device = ")), None)
    return f"{n} x {dev}" if n and dev else target.comment


def more_devices(target: Target) -> list[str]:
    """What a target of one device becomes on a node's 8 devices: the first thing to try when it
    does not fit (an instance's target already has the instance's devices)."""
    return ["devices = 8"] if "devices = 1" in target.lines else []


def fix_lines(target: Target, settings: tuple[str, ...]) -> list[str]:
    """The target's lines with a fix's ``--set`` arguments (``target.NAME.KEY=VALUE``) written in:
    each key on its line, a block's key (``batch.micro``) as that block."""
    lines = list(target.lines)
    for setting in settings:
        path, value = setting.removeprefix(f"target.{target.name}.").split("=", 1)
        block, _, key = path.rpartition(".")
        line = f"{block} {{ {key} = {value} }}" if block else f"{key} = {value}"
        head = block or key
        lines = [ln for ln in lines if ln.split(" ", 1)[0] != head] + [line]
    return lines


def render(name: str, description: str, model: Model, body: list[str], training: list[str],
           targets: list[Target], file: str = "FILE") -> str:
    out = [f"# {description}", "# Written by `accelctl init`; the language: docs/language.md.  Next:",
           f"#   accelctl validate {file}  ·  accelctl plan {file}  ·  accelctl run {file} -t cpu", "",
           f"workload {name} {{", f"  description = {_string(description)}"]
    out += [f"  {ln}" for ln in body]
    if model.comment:
        out.append(f"  # {model.comment}")
    if model.block:
        out.append(f"  {model.line} {{")
        out += [f"    {ln}" for ln in model.block]
        out.append("  }")
    else:
        out.append(f"  {model.line}")
    out += [f"  {ln}" for ln in training]
    out += ["  precision bf16", "  measure { warmup = 3 steps  steps = 10 steps }   # warm-up excluded from the figures"]
    for t in targets:
        out.append("")
        if t.comment:
            out += [f"  # {ln}" for ln in _wrap(t.comment)]
        out.append(f"  target {t.name} {{")
        out += [f"    {ln}" for ln in t.lines]
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def _wrap(text: str, width: int = 92) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


def refusal(text: str, path: Path, target: str, written: bool = False) -> tuple[str, tuple]:
    """plan's words for ``target`` of the file's one workload ("" where it plans) and the fixes its
    refusal offers (each planned: ``accelctl.plan.fixes``); ``written``: the text is what would be
    written, so an error of validate's refuses it."""
    from accelctl.api import plan, validate_text
    from accelctl.errors import PlanError

    specs, diags = validate_text(text, path)
    errors = [d for d in diags if d.severity == "error"]
    if errors and written:
        d = errors[0]
        raise usage(f"the file it would write does not validate ({d.code} at line {d.span.line}: {d.message})")
    if errors:
        return f"{errors[0].code}: {errors[0].message}", ()
    try:
        plan(specs[0], target)
    except PlanError as exc:
        d = exc.diagnostics[0]
        return f"{d.code}: {d.message}", d.fixes
    return "", ()


def scaffold(args, out_dir: Path, file_of=lambda name: "FILE") -> tuple[str, str, list[str]]:
    """(the workload's name, the file's text, each target's verdict: plans, or plan's refusal);
    ``file_of``: the workload's name -> the file as its comment names it."""
    from accelctl.models.catalog import FAMILIES

    model = resolve_model(args.model, args.family, args.config, out_dir)
    tasks = FAMILIES[model.family].tasks
    task = args.task or next((t for t in (("finetune", "pretrain") if model.hub else ("pretrain",)) if t in tasks),
                             tasks[0])
    if task not in tasks:
        raise usage(f"--task {task}: family {model.family} does {', '.join(tasks)}")
    label = model.label or args.model
    name = _identifier(f"{model.stem or args.model}_{task}")
    description = f"{label}: {task}" + ("" if label == model.family else f" ({model.family})")
    body, training = task_lines(model.family, task, model)
    wanted = list(dict.fromkeys(args.target))
    targets = [base_target(v) for v in wanted]
    if not model.shape_known and any(t.lines != base_target("cpu").lines for t in targets):
        raise usage(f"the real shape of {args.model} is unknown here (no config.json: not in the HF cache, no "
                    f"--config): an accelerator target would be planned as the tiny stand-in (E425); give "
                    f"--config PATH (its config.json) or leave the accelerator targets out")
    if not any(t.lines == base_target("cpu").lines for t in targets):
        targets.append(base_target("cpu"))
    if len({t.name for t in targets}) != len(targets):
        raise usage("two targets would have the same name: " + ", ".join(t.name for t in targets))
    path = out_dir / f"{name}.wl"
    verdicts = []
    for t in targets:
        why, fixes = refusal(render(name, description, model, body, training, targets), path, t.name, written=True)
        first, written = why, t.lines
        # as written, then on a node's devices; each time with the first fix plan offers, which plans
        for lines in ([written, [*written, *more_devices(t)]] if more_devices(t) else [written]) if why else ():
            t.lines = [ln for ln in lines if not (ln == "devices = 1" and "devices = 8" in lines)]
            why, fixes = refusal(render(name, description, model, body, training, targets), path, t.name)
            if why and fixes:
                t.lines = fix_lines(t, fixes[0][1])
                why, _ = refusal(render(name, description, model, body, training, targets), path, t.name)
            if not why:
                t.comment = _described(t) + f"; sharded to fit ({first.split(': ', 1)[0]} as first written)"
                break
        if why:
            t.lines, why = written, first
            t.comment += f"; accelctl plan refuses it: {why}"
        verdicts.append({"target": t.name, "plans": not why, "refusal": why or None})
    return name, render(name, description, model, body, training, targets, file_of(name)), verdicts


def cmd_init(args, reply=None) -> int:
    out = args.output
    out_dir = Path.cwd() if out in (None, "-") else Path(out).expanduser().resolve().parent
    if out not in (None, "-"):
        _folder_there(Path(out).expanduser(), out_dir)
    name, text, verdicts = scaffold(args, out_dir, lambda name: "FILE" if out == "-" else _named(_path(out, name)))
    if reply is not None:
        reply.result = {"workload": name, "targets": verdicts, "path": None}
    if out == "-":
        if reply is not None:
            reply.result["text"] = text
        else:
            sys.stdout.write(text)
        return exitcodes.OK
    path = _path(out, name)
    if path.exists() and not args.force:
        raise usage(f"{path} exists: --force overwrites it, -o names another file")
    _write(path, text)
    if reply is not None:
        reply.result["path"] = str(path)
        return exitcodes.OK
    print(f"wrote {path} (workload {name})")
    for v in verdicts:
        print(f"  target {v['target']}: " + ("plans" if v["plans"] else f"refused -- {v['refusal']}"))
    print(f"next: accelctl validate {path}  ·  accelctl plan {path}  ·  accelctl run {path} -t cpu")
    return exitcodes.OK


def _write(path: Path, text: str) -> None:
    """The workload file written whole or not at all (``exportpath.write_file``: a temporary
    file renamed over it, a FIFO opened without waiting for a reader); a place that cannot
    take it is exit 1 naming it and the errno, an earlier file (``--force``) left as it was."""
    from accelctl.report.exportpath import refusal, write_file

    try:
        write_file(path, text.encode("utf-8"))
    except OSError as exc:
        raise refusal("init", path, exc, "write") from None


def _folder_there(path: Path, folder: Path) -> None:
    """The folder of ``-o FILE`` is there: the model's path is written relative to it, and checked
    from it -- a missing one is the refusal ``_write`` would give, not a model path "that does not
    exist"."""
    from accelctl.report.exportpath import refusal

    if not folder.is_dir():
        no = errno.ENOTDIR if os.path.lexists(folder) else errno.ENOENT
        raise refusal("init", path, OSError(no, os.strerror(no)), "write")


def _path(out: str | None, name: str) -> Path:
    """The file written: ``-o FILE``, else NAME.wl here."""
    return Path(out).expanduser() if out else Path(f"{name}.wl")


def _named(path: Path) -> str:
    """The file as the comment above its workload names it (one line: "FILE" where the path
    has a control character)."""
    from accelctl.language.values import control_character

    return "FILE" if control_character(str(path), lines=False) else str(path)

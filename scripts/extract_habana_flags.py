#!/usr/bin/env python3
"""Regenerate ``accelctl/backends/gaudi/data/optimum_habana_flags.json`` from a checkout of
huggingface/optimum-habana.

The example scripts that optimum-habana documents (``examples/gaudi_spawn.py``,
``examples/text-generation/run_generation.py``, ``examples/language-modeling/run_clm.py``,
``examples/stable-diffusion/text_to_image_generation.py`` ...) are not in the PyPI wheel,
so the gaudi plan check cannot read their arguments from the installed package.  This
tool reads them from the repository *without running or copying their code*: it parses
each file with ``ast`` and records, as data,

* argparse scripts: every ``add_argument`` call's option strings, action, type, nargs,
  choices, const, default (literals only) and required;
* HfArgumentParser scripts: the fields of the script's own argument dataclasses (name,
  annotation text, literal default), and the extensions its ``DataTrainingArguments``
  accept for each data file (``file_extensions``: ``train_file`` -> ["csv", "json", "txt"],
  read from the ``assert extension in [...]`` of its ``__post_init__``); the training
  arguments themselves come from the installed ``GaudiTrainingArguments`` at check time.

Usage (the repository as a bare git dir or a work tree, and the commit to read)::

    python scripts/extract_habana_flags.py GIT_DIR COMMIT [--package-version 1.21.2] > \
        accelctl/backends/gaudi/data/optimum_habana_flags.json
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys

REPOSITORY = "huggingface/optimum-habana"
#: repository path -> (kind, the dataclasses to read for hf_dataclasses scripts)
SCRIPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "examples/gaudi_spawn.py": ("argparse", ()),
    "examples/text-generation/run_generation.py": ("argparse", ()),
    "examples/language-modeling/run_clm.py": ("hf_dataclasses", ("ModelArguments", "DataTrainingArguments")),
    "examples/language-modeling/run_mlm.py": ("hf_dataclasses", ("ModelArguments", "DataTrainingArguments")),
    "examples/summarization/run_summarization.py": ("hf_dataclasses", ("ModelArguments", "DataTrainingArguments")),
    "examples/stable-diffusion/text_to_image_generation.py": ("argparse", ()),
}


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


def _name(node: ast.AST) -> str:
    """``int`` -> "int", ``argparse.BooleanOptionalAction`` -> "BooleanOptionalAction"."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def argparse_table(tree: ast.AST) -> dict:
    options, positionals = [], []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        row: dict = {"names": names}
        if "action" in kw:
            row["action"] = _name(kw["action"])
        if "type" in kw:
            row["type"] = _name(kw["type"])
        for key in ("nargs", "choices", "const", "default", "required"):
            if key in kw:
                val = kw[key]
                if key == "nargs" and isinstance(val, ast.AST) and not isinstance(val, ast.Constant):
                    row[key] = _name(val)  # argparse.REMAINDER
                else:
                    row[key] = _literal(val)
        (options if names and names[0].startswith("-") else positionals).append(row)
    return {"options": options, "positionals": positionals}


def default_prompts(tree: ast.AST) -> list[str]:
    """The built-in prompt list of run_generation.py (the first list of strings assigned
    to ``input_sentences``): what it generates from when given no ``--prompt``."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "input_sentences"
                                                  for t in node.targets)
                and isinstance(node.value, ast.List)):
            vals = _literal(node.value)
            if vals and all(isinstance(v, str) for v in vals):
                return vals
    return []


def dataclass_table(tree: ast.AST, classes: tuple[str, ...]) -> dict:
    out: dict[str, list] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name in classes):
            continue
        fields = []
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            row = {"name": stmt.target.id, "annotation": ast.unparse(stmt.annotation)}
            v = stmt.value
            if isinstance(v, ast.Call) and _name(v.func) == "field":
                kw = {k.arg: k.value for k in v.keywords if k.arg}
                if "default" in kw:
                    row["default"] = _literal(kw["default"])
                elif "default_factory" in kw:
                    row["default_factory"] = True
                else:
                    row["required"] = True
                meta = kw.get("metadata")
                if isinstance(meta, ast.Dict):
                    for k, mv in zip(meta.keys, meta.values):
                        if isinstance(k, ast.Constant) and k.value == "choices":
                            row["choices"] = _literal(mv)
            elif v is not None:
                row["default"] = _literal(v)
            else:
                row["required"] = True
            fields.append(row)
        out[node.name] = fields
    return out


def file_extensions(tree: ast.AST, cls: str = "DataTrainingArguments") -> dict[str, list[str]]:
    """The data file checks of an HfArgumentParser script's ``cls.__post_init__``: for each
    ``self.<name>_file`` whose extension it compares with a list (``extension =
    self.train_file.split(".")[-1]`` then ``assert extension in [...]`` or ``if extension not in
    [...]: raise``), the field name -> the extensions the script accepts."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == cls):
            continue
        post = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__post_init__"), None)
        if post is None:
            continue
        for branch in ast.walk(post):
            if not isinstance(branch, ast.If):
                continue
            field_name = _self_file(branch.test)
            if field_name is None:
                continue
            for sub in ast.walk(ast.Module(body=branch.body, type_ignores=[])):
                if (isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Name) and sub.left.id == "extension"
                        and isinstance(sub.ops[0], (ast.In, ast.NotIn))):
                    allowed = _literal(sub.comparators[0])
                    if isinstance(allowed, list) and all(isinstance(x, str) for x in allowed):
                        out.setdefault(field_name, allowed)
    return out


def _self_file(test: ast.AST) -> str | None:
    """``self.train_file is not None`` -> "train_file"."""
    if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Attribute)
            and isinstance(test.left.value, ast.Name) and test.left.value.id == "self"
            and test.left.attr.endswith("_file") and isinstance(test.ops[0], ast.IsNot)):
        return test.left.attr
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("git_dir")
    ap.add_argument("commit")
    ap.add_argument("--package-version", default="", help="the optimum-habana release these flags are checked against")
    args = ap.parse_args(argv)
    commit = _git(args.git_dir, "rev-parse", args.commit).strip()
    committed = _git(args.git_dir, "log", "-1", "--format=%cI", commit).strip()
    scripts = {}
    for path, (kind, classes) in SCRIPTS.items():
        tree = ast.parse(_git(args.git_dir, "show", f"{commit}:{path}"))
        entry: dict = {"kind": kind}
        if kind == "argparse":
            entry.update(argparse_table(tree))
            if path.endswith("run_generation.py"):
                entry["default_prompts"] = default_prompts(tree)
        else:
            entry["dataclasses"] = dataclass_table(tree, classes)
            entry["file_extensions"] = file_extensions(tree)
            entry["training_arguments"] = "optimum.habana.GaudiTrainingArguments"
        scripts[path] = entry
    doc = {
        "generated_by": "scripts/extract_habana_flags.py",
        "source": {"repository": REPOSITORY, "commit": commit, "committed": committed,
                   "package_version": args.package_version},
        "note": "argument names and shapes read with ast from the scripts at this commit; no code copied",
        "scripts": scripts,
    }
    sys.stdout.write(dumps(doc) + "\n")
    return 0


def dumps(obj, indent: str = "") -> str:
    """JSON with one argument row per line (readable diffs when the scripts change)."""
    inner = indent + "  "
    if isinstance(obj, dict) and any(isinstance(v, (dict, list)) and v for v in obj.values()) and "names" not in obj:
        body = ",\n".join(f"{inner}{json.dumps(k)}: {dumps(v, inner)}" for k, v in sorted(obj.items()))
        return "{\n" + body + "\n" + indent + "}"
    if isinstance(obj, list) and obj and all(isinstance(v, dict) for v in obj):
        body = ",\n".join(inner + json.dumps(v, sort_keys=True) for v in obj)
        return "[\n" + body + "\n" + indent + "]"
    return json.dumps(obj, sort_keys=True)


if __name__ == "__main__":
    raise SystemExit(main())

"""``stack { ... }``: the software a target's machine must run, checked where it is written.

``stack { image = "..." | ami = "..."  sdk = synapseai("1.8.0")  packages { deepspeed = "0.19.8" } }``:
written in a workload every target inherits it; in a target its keys replace the workload's and
its packages are pinned over them.  Errors: an unknown SDK or one the device does not run (E240),
an unknown package (E241), a version that is not a pinned release (E242), image and AMI by pattern
(E216).  What a plan makes of it is ``accelctl.plan.stack``'s; a pin that contradicts a plan is
the backend's refusal at the pin's line.
"""

from __future__ import annotations

import re
from typing import Any

from accelctl.dsl import ast
from accelctl.errors import did_you_mean
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.language import values as V
from accelctl.catalog import DEVICES
from accelctl.language.check_common import items_by_key, plain_block
from accelctl.workload.types import StackSpec

#: SDK -> (how a plan names it, the device family that runs it), from the families' rows
SDKS: dict[str, tuple[str, str]] = {f.sdk: (f.sdk_title, f.name) for f in DEVICE_FAMILIES.values() if f.sdk}
#: the packages a stack may pin (PyPI names, normalised: lower case, "-"), and what each is for;
#: habana-deepspeed is Habana's DeepSpeed fork, installed from its git tag
PACKAGES: dict[str, str] = {
    "transformers": "Hugging Face transformers",
    "tokenizers": "Hugging Face tokenizers",
    "huggingface-hub": "the Hub client",
    "accelerate": "Hugging Face accelerate",
    "datasets": "Hugging Face datasets",
    "safetensors": "safetensors",
    "diffusers": "diffusers",
    "timm": "timm (PyTorch Image Models)",
    "torch": "PyTorch",
    "torchvision": "torchvision",
    "deepspeed": "DeepSpeed (PyPI)",
    "habana-deepspeed": "Habana's DeepSpeed fork (git+https://github.com/HabanaAI/DeepSpeed.git@VERSION)",
    "optimum-habana": "optimum-habana",
    "optimum-neuron": "optimum-neuron",
    "torch-neuronx": "torch-neuronx (Neuron's PyTorch)",
    "neuronx-cc": "the Neuron compiler",
    "torch-xla": "torch-xla",
    "transformer-engine": "NVIDIA Transformer Engine",
}
#: packages of which a stack pins one at most (the same import name)
EXCLUSIVE = (("deepspeed", "habana-deepspeed"),)
#: one release, as pip pins it: 4.43.4, 1.13.1.1.11.0, 2.1.0rc1, 0.9.5.post1, 2.1.0+cu121
VERSION = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6}){0,5}((a|b|rc)[0-9]{1,4})?(\.post[0-9]{1,4})?(\.dev[0-9]{1,4})?"
                     r"(\+[A-Za-z0-9]{1,16}(\.[A-Za-z0-9]{1,16}){0,3})?")
#: an AMI: its id, or its name (AWS: 3-128 characters of letters, digits, ( ) [ ] space . / ' @ _ -)
AMI = V.token(r"ami-[0-9a-f]{8}([0-9a-f]{9})?|[A-Za-z0-9(\[][A-Za-z0-9()\[\] ./'@_-]{2,127}",
              '"Deep Learning AMI Neuron PyTorch 1.13 (Ubuntu 20.04) 20230720"', "AMI id or name")
KEYS = ("image", "ami", "sdk", "packages")


def normal(name: str) -> str:
    """A package name as PyPI compares them (PEP 503: case and ``_``/``.`` runs ignored)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def version_value(v: ast.Value, ctx: V.Ctx, key: str) -> str | Any:
    """``"4.43.4"``: one release (E242 otherwise; E301 for a bare number)."""
    if not isinstance(v, ast.Str):
        hint = f'write {key} = "{ast.value_text(v)}"' if isinstance(v, (ast.Num, ast.Word)) else ""
        return ctx.error("E301", f"{key} must be a version string, got {V.describe(v)}", v.span, hint)
    if not VERSION.fullmatch(v.value):
        return ctx.error("E242", f"{key} {ast.value_text(v)} is not one release", v.span,
                         'a stack pins exact releases, as pip writes them: "4.43.4", "2.1.0rc1", "2.1.0+cu121" '
                         "(no ranges, no wildcards)")
    return v.value


def _sdk(v: ast.Value, ctx: V.Ctx) -> tuple[str, str] | None:
    if not isinstance(v, ast.Call) or v.kwargs or len(v.args) != 1:
        ctx.error("E240", f"sdk must be an SDK and its version, got {V.describe(v)}", v.span,
                  'write sdk = synapseai("1.8.0"), neuron("2.12.0") or cuda("12.1")')
        return None
    if v.name not in SDKS:
        ctx.error("E240", f"unknown SDK '{v.name}'", v.name_span, did_you_mean(v.name, SDKS) or f"SDKs: {', '.join(SDKS)}")
        return None
    version = version_value(v.args[0], ctx, f"{v.name} version")
    return None if version is V.BAD else (v.name, version)


def check_stack(it: ast.Item, ctx: V.Ctx, origins, prefix: str) -> dict[str, Any]:
    """The keys one ``stack { }`` block writes (``packages`` a dict of pins), each recorded in
    ``origins`` under ``prefix`` (``stack.packages.transformers``)."""
    if not plain_block(it, ctx, "stack", 'write stack { packages { transformers = "4.43.4" } }'):
        return {}
    out: dict[str, Any] = {}
    for key, item in items_by_key(it.items, ctx).items():
        if key not in KEYS:
            ctx.error("E202", f"unknown key '{key}' in stack", item.kind_span if isinstance(item, ast.Block)
                      else item.key_span, did_you_mean(key, KEYS) or f"keys: {', '.join(KEYS)}")
            continue
        if key == "packages":
            out["packages"] = _packages(item, ctx, origins, f"{prefix}.packages")
            continue
        if not isinstance(item, ast.Entry):
            ctx.error("E209", f"'{key}' is a setting, not a block", item.span, f"write {key} = <value>")
            continue
        if key == "sdk":
            got = _sdk(item.value, ctx)
            if got:
                out["sdk"] = got
        else:
            got = (AMI if key == "ami" else V.IMAGE).fn(item.value, ctx, key)
            if got is not V.BAD:
                out[key] = got
        if key in out:
            origins.add(f"{prefix}.{key}", item.value.span)
    return out


def _packages(it: ast.Item, ctx: V.Ctx, origins, prefix: str) -> dict[str, str]:
    if not plain_block(it, ctx, "packages", 'write packages { transformers = "4.43.4" }'):
        return {}
    pins: dict[str, str] = {}
    seen: dict[str, ast.Item] = {}
    for item in it.items:
        name = normal(item[0])
        span = item.kind_span if isinstance(item, ast.Block) else item.key_span
        if name not in PACKAGES:
            ctx.error("E241", f"unknown package '{item[0]}' in stack packages", span,
                      did_you_mean(name, PACKAGES) or "packages a stack pins: " + ", ".join(PACKAGES))
            continue
        if name in seen:
            ctx.error("E204", f"duplicate package '{item[0]}'", span,
                      f"'{name}' is already pinned at line {seen[name].span.line}")
            continue
        seen[name] = item
        if not isinstance(item, ast.Entry):
            ctx.error("E208", f"pin {item[0]} with '='", span, f'write {item[0]} = "1.0.0"')
            continue
        version = version_value(item.value, ctx, item[0])
        if version is not V.BAD:
            pins[name] = version
            origins.add(f"{prefix}.{name}", item.span)
    for group in EXCLUSIVE:
        both = [n for n in group if n in pins]
        if len(both) > 1:
            ctx.error("E241", f"{' and '.join(both)} are both pinned: one DeepSpeed is installed", seen[both[1]].span,
                      f"keep {both[0]} (PyPI) or {both[1]} (Habana's fork)")
    return pins


def resolve(workload: dict[str, Any], own: dict[str, Any], device: str, ctx: V.Ctx, origins,
            target: str) -> StackSpec:
    """The target's stack: its own keys over the workload's, its pins over the workload's; an
    SDK the device does not run is E240 at the SDK that applies."""
    merged = {**workload, **own}
    merged["packages"] = {**workload.get("packages", {}), **own.get("packages", {})}
    sdk, version = merged.get("sdk", ("", ""))
    if sdk:
        name, adapter = SDKS[sdk]
        if DEVICES[device].adapter != adapter:
            span = origins.get(f"targets.{target}.stack.sdk") or origins.get("stack.sdk")
            ctx.error("E240", f"target {target} runs {device} devices; {name} is not their SDK", span,
                      "the SDK of " + ", ".join(f"{a} devices is {n}" for n, a in SDKS.values())
                      + f": write that in target {target}'s own stack")
    return StackSpec(image=merged.get("image", ""), ami=merged.get("ami", ""), sdk=sdk, sdk_version=version,
                     packages=dict(sorted(merged["packages"].items())))

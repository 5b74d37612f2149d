"""DeepSpeed kernel injection checked on the target's pinned stack, in a side environment.

    PYTHONPATH=.venv-ds-legacy:. .venv/bin/python -m accelctl.backends.deepspeed.inject_check PLAN.json

A ``deepspeed_inference`` plan with ``kernel_inject = on`` whose target pins transformers is
checked with that transformers (``scripts/setup-ds-legacy.sh``, laid over ``.venv``'s torch and
DeepSpeed): DeepSpeed's own steps before the kernels (config, policy choice, container, model
config) on a one-layer model of the plan's family.  ``create_module`` builds CUDA kernels and
is reported NOT RUN on CPU.  One JSON line per plan.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from accelctl.backends.deepspeed.release import installed_version
from accelctl.backends.findings import CheckResult, not_run

#: the repository (or site-packages) root holding ``accelctl``
ROOT = Path(__file__).resolve().parents[3]
#: where the side environments live (``$ACCELCTL_SIDE_ENVS`` lists more, ":"-separated)
SIDE_ENVS = (".venv-ds-legacy",)
#: the pins this check runs against (the rest of the plan's checks use ``.venv``'s)
CHECKED = ("transformers", "tokenizers", "huggingface-hub", "deepspeed")
#: family -> (transformers config class, model class, block count key, head count key, hidden key)
MODELS = {
    "bloom": ("BloomConfig", "BloomForCausalLM", "n_layer", "n_head", "hidden_size"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", "n_layer", "n_head", "n_embd"),
    "llama": ("LlamaConfig", "LlamaForCausalLM", "num_hidden_layers", "num_attention_heads", "hidden_size"),
}
HEAD_SIZE = 8


def side_envs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("ACCELCTL_SIDE_ENVS", "").split(":") if p]
    return [*extra, *(ROOT / name for name in SIDE_ENVS)]


def held_versions(folder: Path) -> dict[str, str]:
    """name -> version of the distributions a ``pip install --target`` folder holds (their
    dist-info names; nothing imported)."""
    out = {}
    for d in folder.glob("*.dist-info"):
        m = re.fullmatch(r"(.+?)-([^-]+)\.dist-info", d.name)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def find_env(pins: dict[str, str]) -> tuple[Path | None, str]:
    """The side environment (None: ``.venv`` itself) whose packages over ``.venv``'s are the
    pinned ones of ``CHECKED``; else (None, why not)."""
    wanted = {n: v for n, v in pins.items() if n in CHECKED}
    if all(installed_version(n) == v for n, v in wanted.items()):
        return None, ""
    for env in side_envs():
        if not env.is_dir():
            continue
        held = held_versions(env)
        if all(held.get(n, installed_version(n)) == v for n, v in wanted.items()):
            return env, ""
    pinned = ", ".join(f"{n}=={v}" for n, v in wanted.items())
    looked = ", ".join(str(e) for e in side_envs()) or "none listed"
    return None, (f"no side environment here holds {pinned} (looked in: {looked}; scripts/setup.sh --test makes "
                  ".venv-ds-legacy with transformers 4.43.4)")


def check_results(plan, spec) -> list[CheckResult]:
    """The injection check of ``plan`` in the side environment its stack needs (NOT RUN where none
    holds it); ``[]`` for a plan this check is not about."""
    target = spec.target(plan.target)
    pins = target.stack.packages
    if not target.parallel.kernel_inject or "transformers" not in pins:
        return []
    tool = f"DeepSpeed kernel injection on transformers {pins['transformers']}"
    env, why = find_env(pins)
    if why:
        return [not_run(tool, why)]
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(plan.to_json())
    path = ":".join(str(p) for p in (env, ROOT) if p is not None)
    run_env = {**os.environ, "PYTHONPATH": path, "DS_ACCELERATOR": "cpu", "ACCELCTL_STACK_PINS": json.dumps(pins)}
    try:
        cp = subprocess.run([sys.executable, "-m", __name__, fh.name], capture_output=True, text=True, timeout=600,
                            cwd=ROOT, env=run_env)
    finally:
        os.unlink(fh.name)
    where = f" ({env.name} over {Path(sys.prefix).name})" if env else ""
    try:
        report = json.loads(cp.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [CheckResult(tool + where, False, (cp.stderr.strip().splitlines() or ["no report"])[-3:])]
    return [CheckResult(tool + where, not report["errors"], [*report["errors"], *report["messages"]],
                        pins=tuple(n for n in pins if n in CHECKED))]


# --------------------------------------------------------------------------- in the side environment

def _model(family: str, heads: int):
    import transformers

    config_cls, model_cls, layers_key, heads_key, hidden_key = MODELS[family]
    config = getattr(transformers, config_cls)(**{layers_key: 1, heads_key: heads, hidden_key: heads * HEAD_SIZE,
                                                  "vocab_size": 256})
    return getattr(transformers, model_cls)(config)


def inject(plan: dict, pins: dict[str, str]) -> tuple[list[str], list[str]]:
    """(errors, messages) of the steps before the kernels (see the module doc)."""
    import deepspeed
    import tokenizers
    import transformers
    from deepspeed.inference.config import DeepSpeedInferenceConfig
    from deepspeed.module_inject.replace_policy import replace_policies
    from deepspeed.module_inject.utils import policy_to_ds_container

    errors: list[str] = []
    have = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "deepspeed": deepspeed.__version__}
    errors += [f"the side environment imports {n} {have[n]}, not the pinned {v}" for n, v in pins.items()
               if n in have and have[n] != v]
    msgs = [f"imported transformers {have['transformers']}, tokenizers {have['tokenizers']}, DeepSpeed "
            f"{have['deepspeed']} (torch {__import__('torch').__version__})"]
    family = plan["job"]["model"]["family"]
    if family not in MODELS:
        return errors, msgs + [f"NOT RUN: no {family} model built here for the policy check (families: "
                               f"{', '.join(MODELS)})"]
    files = {f["path"]: f["content"] for f in plan["files"]}
    cfg = DeepSpeedInferenceConfig(**json.loads(files["ds_inference.json"]))
    heads = int(plan["job"]["architecture"]["heads"])
    model = _model(family, heads)
    msgs.append(f"DeepSpeedInferenceConfig: tp_size {cfg.tensor_parallel.tp_size}, dtype {cfg.dtype}, "
                f"replace_with_kernel_inject {cfg.replace_with_kernel_inject}; model {type(model).__name__} from its "
                f"configuration ({heads} heads as the real model, 1 layer, head size {HEAD_SIZE})")
    table = {}
    for policy in replace_policies:  # as replace_module builds it
        policy(None)
        orig = policy._orig_layer_class
        for cls in orig if isinstance(orig, list) else [orig]:
            if cls is not None:
                table[cls] = policy
    blocks = [m for m in model.modules() if type(m) in table]
    if not blocks:
        return errors + [f"DeepSpeed {have['deepspeed']} has no injection policy for any module of "
                         f"{type(model).__name__}: replace_module would inject nothing"], msgs
    child = blocks[0]
    policy = table[type(child)](child, inference=True)
    msgs.append(f"policy: {type(policy).__name__} for {type(child).__name__} ({len(blocks)} block(s))")
    try:
        container = policy_to_ds_container(policy=policy, config=cfg, model_config=model.config, layer_id=0,
                                           child=child)
        container.set_moe(False)
        container.set_tensor_parallel_config(cfg.tensor_parallel.tp_size, None)
        container.initialize_tensors()
        if cfg.dtype in (__import__("torch").float16, __import__("torch").bfloat16):
            container.convert_to_required_dtype()
        container.create_ds_model_config()
    except Exception as exc:  # noqa: BLE001 - DeepSpeed's RuntimeError / AssertionError, as init_inference raises
        return errors + [f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"], msgs
    mc = container.ds_model_config
    msgs.append(f"container {type(container).__name__}: heads {mc.heads}, hidden {mc.hidden_size}, mp_size "
                f"{mc.mp_size}, dtype {mc.dtype}")
    try:
        container.create_module()
        msgs.append(f"create_module: {type(container.module).__name__}")
    except Exception as exc:  # noqa: BLE001
        msgs.append(f"create_module (the injected kernels): NOT RUN on this CPU, DeepSpeed's CPU accelerator has "
                    f"no InferenceBuilder ({type(exc).__name__}: {' '.join(str(exc).split())[:160]}); it needs CUDA")
    return errors, msgs


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.disable(logging.WARNING)
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    pins = json.loads(os.environ.get("ACCELCTL_STACK_PINS", "{}"))
    failed = 0
    for path in argv if argv is not None else sys.argv[1:]:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
        errors, messages = inject(plan, pins)
        print(json.dumps({"errors": errors, "messages": messages}))
        failed += bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

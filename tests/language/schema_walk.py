"""The workloads of the schema walk (issue 23 item 2): one small workload per key and value the
language accepts, generated from the tables of ``accelctl.language.schema``, and the verdict on
each -- refused before launch (a positioned diagnostic from validate, plan or the rehearsal's
plan), or a plan that runs here (a cpu target, or the CPU rehearsal of an accelerator target).

Values come from each key's value type: every choice of a choice, on and off of a switch,
the lowest value of a whole number, the example of a quantity; ``SAMPLES`` gives the keys
whose type says too little (a learning rate, a string).  A key of the schema with no value
here fails the walk: a new key joins it by a row.
"""

from __future__ import annotations

import re
import textwrap
from collections import namedtuple
from dataclasses import dataclass

from accelctl import api
from accelctl.errors import AccelctlError
from accelctl.language import schema as S
from accelctl.catalog import DEVICES
from accelctl.models.catalog import FAMILIES

#: values of keys whose type does not give a usable one (numbers, strings, names)
SAMPLES: dict[str, list[str]] = {
    "description": ['"a walk"'], "seed": ["3"], "prompt": ['"Hello"'], "guidance_scale": ["7.5"],
    "lr": ["0.001"], "weight_decay": ["0.01"], "momentum": ["0.9"], "grad_clip": ["1.0"],
    # 64, not less: BERT MLM at a few tokens can mask none (NaN loss; issue 22 item 8's, another change)
    "seq_len": ["64 tokens"], "target_len": ["8 tokens"], "image_size": ["32"], "channels": ["3"], "classes": ["10"],
    "config": ['"c"'], "split": ['"train"'], "column": ['"text"'], "target_column": ['"summary"'],
    "prompt_tokens": ["8 tokens"], "mlm_probability": ["0.2"],
    "micro": ["2 samples"], "global": ["2 samples"], "micro_batch": ["2 samples"], "batch_size": ["2 samples"],
    "steps": ["2 steps"], "warmup": ["1 steps"], "every": ["1 steps"], "dir": ['"ckpt"'],
    "mlflow": ['"sqlite:///mlflow.db"'], "wandb": ['"walk"'], "experiment": ['"walk"'],
    "instance": ["p4d.24xlarge"], "te_version": ['"2.9"'], "devices": ["2"], "nodes": ["2"],
    "train_steps": ["100 steps"], "max_new_tokens": ["4 tokens"], "inference_steps": ["2 steps"],
    "threads": ["1"], "dataloader_workers": ["0"], "memory": ["16 GB"], "price": ["1 usd/h"],
}
#: engine block settings: values per (engine, key) where the type gives none
ENGINE_SAMPLES = {"rdzv_endpoint": ['"127.0.0.1:29400"'], "rdzv_id": ["job7"], "hosts": ['["node-1"]'],
                  "hostfile": ['"hosts.txt"'], "master_addr": ['"node-1"'], "node_selector": ['["a=b"]'],
                  "volume_path": ['"/mnt/runs"'], "role_arn": ['"arn:aws:iam::123456789012:role/batch"'],
                  "partition": ['"debug"'], "account": ['"acct"'], "qos": ['"normal"'], "constraint": ['"a100&ib"'],
                  "gres": ['"gpu:1"'], "container_image": ['"nvcr.io/nvidia/pytorch:24.05-py3"'],
                  "image": ['"nvcr.io/nvidia/pytorch:24.05-py3"'], "namespace": ['"default"'],
                  "service_account": ['"default"'], "priority_class": ['"high"'], "volume_claim": ['"runs"'],
                  "job_queue": ['"dl1-queue"'], "job_definition": ['"dl1-def"']}
#: target options that belong to one device family: walked on a target of that device
OPTION_DEVICE = {"hpu_graphs": "gaudi2", "lazy_mode": "gaudi2", "te_layers": "h100", "te_version": "h100",
                 "neuron_parallel_compile": "trn1", "script": "gaudi2", "pin_memory": "h100"}
#: the base model of each task kind (the smallest stand-ins that do it)
MODEL = {"pretrain": "bert(layers = 1, hidden = 32, heads = 2)", "finetune": "bert(layers = 1, hidden = 32, heads = 2)",
         "generate": "gpt2(layers = 1, hidden = 32, heads = 2)", "infer": "bert(layers = 1, hidden = 32, heads = 2)"}
#: the parallel strategies' arguments to walk
PARALLEL_ARGS = {"stage": ["0", "1", "2", "3"], "tp": ["2"], "pp": ["2"], "offload_optimizer": ["none", "cpu", "nvme"],
                 "offload_param": ["none", "cpu", "nvme"], "kernel_inject": ["on", "off"],
                 "reshard_after_forward": ["on", "off"], "offload": ["none", "cpu"],
                 "schedule": ["gpipe", "one_f_one_b"], "sequence_parallel": ["on", "off"]}


def values_of(key: str, vtype, samples: dict[str, list[str]] = SAMPLES) -> list[str]:
    """The values the walk writes for ``key`` of type ``vtype``."""
    if key in samples:
        return samples[key]
    if vtype.name.startswith("on/off"):
        return ["on", "off", *vtype.name.split("/")[2:]]
    if vtype.name.startswith("one of "):
        return vtype.detail.split(", ")
    if vtype.name == "whole number":
        lo = re.match(r"(-?[\d_]+)", vtype.detail)
        return [str(max(1, int(lo.group(1).replace("_", "")))) if lo else "1"]
    if vtype.name.startswith("quantity of "):
        return [{"time": "30 s", "bytes": "16 GB", "price": "1 usd/h"}[vtype.name.removeprefix("quantity of ")]]
    return []


class Case(namedtuple("Case", "where key value task device text")):
    """One workload of the walk: ``where`` the value is written, the key and the value, the
    task and device of its target, and the workload's text."""

    @property
    def id(self) -> str:
        return f"{self.where}.{self.key}={self.value}@{self.device or 'its device'}/{self.task}"


def _workload(name: str, task: str, device: str, task_body: str = "", model_body: str = "", blocks: str = "",
              target_body: str = "", measure: bool = True) -> str:
    generate = "max_new_tokens = 4 tokens" if task == "generate" and "max_new_tokens" not in task_body else ""
    target = f"device = {device}" if device else ""
    return textwrap.dedent(f"""\
        workload {name} {{
          task {task} {{ {generate} {task_body} }}
          model {MODEL[task]} {{ {model_body} }}
          {blocks}
          {"measure { warmup = 1 steps  steps = 2 steps }" if measure else ""}
          target t {{ {target} {target_body} }}
        }}
        """)


def cases(samples: dict[str, list[str]] = SAMPLES) -> list[Case]:
    """Every key and value of the schema's tables, each in a workload of its own (``samples``: the
    values of keys whose type gives none, and of any other key to walk with other values)."""
    out: list[Case] = []

    def add(where, key, value, task="pretrain", device="cpu", **parts):
        name = "w" + str(len(out))
        out.append(Case(where, key, value, task, device, _workload(name, task, device, **parts)))

    def each(table, where, write, task="pretrain", device="cpu", samples=samples):
        for key, vtype in table.items():
            vals = values_of(key, vtype, samples)
            assert vals, f"the schema walk has no value for {where}.{key} ({vtype.name}): add it to SAMPLES"
            for v in vals:
                add(where, key, v, task, device, **write(key, v))

    each(S.WORKLOAD_KEYS, "workload", lambda k, v: {"blocks": f"{k} = {v}"})
    for key, (vtype, kinds) in S.TASK_KEYS.items():
        for kind in kinds:
            for v in values_of(key, vtype, samples) or [None]:
                assert v is not None, f"no value for task.{key}"
                add("task", key, v, kind, task_body=f"{key} = {v}")
    each(S.MODEL_KEYS, "model", lambda k, v: {"model_body": f"{k} = {v}"})
    each(S.DATASET_KEYS, "dataset", lambda k, v: {"blocks": f"dataset synthetic {{ {k} = {v} }}"})
    for source in S.DATASET_SOURCES:
        arg = {"synthetic": "", "files": '("walk.txt")', "hf": '("wikitext") { fallback = synthetic }'}[source]
        add("dataset", "source", source, blocks=f"dataset {source}{arg}")
    each(S.BATCH_KEYS, "batch", lambda k, v: {"blocks": f"batch {{ {k} = {v} }}"})
    for name in S.OPTIMIZERS:
        add("optimizer", "name", name, blocks=f"optimizer {name}(lr = 0.001)")
    each(S.OPTIMIZER_KEYS, "optimizer", lambda k, v: {"blocks": f"optimizer sgd {{ {k} = {v} }}"})
    each(S.MEASURE_KEYS, "measure", lambda k, v: {"blocks": f"measure {{ {k} = {v} }}", "measure": False})
    # compile needs 2 warm-up steps (E225) and compile_mode needs compile = on (E223): walked with them
    each(S.OPTIMIZE_KEYS, "optimize", lambda k, v: {
        "blocks": f"optimize {{ {'compile = on  ' if k == 'compile_mode' else ''}{k} = {v} }}\n"
                  "  measure { warmup = 2 steps  steps = 3 steps }", "measure": False})
    each(S.CHECKPOINT_KEYS, "checkpoint", lambda k, v: {"blocks": f"checkpoint {{ every = 1 steps  {k} = {v} }}"
                                                        if k != "every" else f"checkpoint {{ every = {v} }}"})
    each(S.TRACK_KEYS, "track", lambda k, v: {"blocks": f"track {{ {k} = {v} }}"})
    for p in S.PRECISIONS:
        for device in ("cpu", "h100", "gaudi2"):
            add("precision", "dtype", p, device=device, target_body=f"precision = {p}")
    each(S.FP8_KEYS, "fp8", lambda k, v: {"target_body": f"precision fp8 {{ {k} = {v} }}"}, device="h100")
    for engine, table in S.ENGINE_KEYS.items():
        each(table, f"engine {engine}", lambda k, v, e=engine: {"blocks": f"engine {e} {{ {k} = {v} }}"},
             samples={**samples, **ENGINE_SAMPLES})
    for key, vtype in S.TARGET_KEYS.items():
        vals = values_of(key, vtype, samples)
        assert vals, f"the schema walk has no value for target.{key}: add it to SAMPLES"
        for v in vals:
            for device in ("cpu", OPTION_DEVICE.get(key, "a100")):
                if key in ("device", "instance"):
                    if device == "cpu":  # the value is the target's device: no other beside it
                        add("target", key, v, device="", target_body=f"{key} = {v}")
                    continue
                add("target", key, v, device=device, target_body=f"{key} = {v}")
    for strategy, args in S.PARALLEL_STRATEGIES.items():
        for device, task in (("cpu", "pretrain"), ("a100", "pretrain"), ("a100", "generate"), ("gaudi2", "pretrain"),
                             ("gaudi2", "generate")):
            add("parallel", "strategy", strategy, task, device, target_body=f"devices = 2  parallel = {strategy}")
            for arg in args:
                for v in PARALLEL_ARGS[arg]:
                    add("parallel", f"{strategy}.{arg}", v, task, device,
                        target_body=f"devices = 2  parallel = {strategy}({arg} = {v})")
    return out


@dataclass(frozen=True)
class Verdict:
    """``refused``: the positioned diagnostics that stop it before launch; else ``rehearse``:
    whether it runs as the CPU rehearsal of its target (an accelerator), or as it is (the host)."""

    refused: tuple = ()
    rehearse: bool = False


def verdict(case: Case, path) -> Verdict:
    """What accelctl says of ``case`` before launching anything; raises on anything but a
    refusal (a bug: the walk fails)."""
    path.write_text(case.text, encoding="utf-8")
    specs, diags = api.validate(path)
    errors = tuple(d for d in diags if d.severity == "error")
    if errors:
        return Verdict(errors)
    refusals = tuple(d for d in diags if d.severity == "warning" and d.code.startswith("E"))
    (spec,) = specs
    target = spec.targets[0]
    try:
        api.plan(spec, target)
    except AccelctlError as exc:
        assert refusals, f"{case.id}: plan refused what validate passed: {exc.diagnostics}"
        return Verdict(tuple(exc.diagnostics))
    assert not refusals, f"{case.id}: validate refused what plan plans: {refusals}"
    host = DEVICES[target.device].host
    if not host:
        api.plan(spec, target, rehearse=True, device_path=True)  # a refusal here raises: the walk fails
    return Verdict(rehearse=not host)


FAMILY_OF = {task: MODEL[task].split("(")[0] for task in MODEL}
assert all(t in FAMILIES[f].tasks for t, f in FAMILY_OF.items())

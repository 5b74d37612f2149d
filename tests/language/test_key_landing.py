"""Each key's row says where it lands in the job (``schema.landing``: ``WorkerJob`` fields, or
none and what reads it instead), and the job the plan builds proves every row: a workload with
the key written and the same workload without it (or with another value) plan jobs that differ
in the row's fields and nowhere else -- but for what the planner resolves from a target as a
whole (its backend, strategy and threads) -- and a key no job carries changes no field at all.

The workloads are the schema walk's (``schema_walk.cases``), walked with values other than the
defaults where the walk's own are the defaults, plus a few that need a context of their own.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest
from schema_walk import SAMPLES, cases

from accelctl import api
from accelctl.contract import codec
from accelctl.contract.job import WorkerJob
from accelctl.errors import AccelctlError
from accelctl.frozen import fields
from accelctl.language import schema as S

ROOT = Path(__file__).resolve().parents[2]
LLAMA_CONFIG = ROOT / "tests" / "data" / "hf_configs" / "Meta-Llama-3-8B.json"

#: values that are not the defaults, so that writing the key changes something
OTHER_VALUES = {**SAMPLES, "accumulation": ["2"], "repeat": ["2"], "channels": ["1"], "split": ['"test"'],
                "guidance_scale": ["5.0"], "lr": ["0.01"], "dataloader_workers": ["2"], "global": ["1 samples"],
                "max_new_tokens": ["4 tokens", "5 tokens"], "every": ["1 steps", "2 steps"], "threads": ["1", "3"]}

#: (table, key) -> pairs of workloads, with the key and without it (or with another value), for
#: keys the walk cannot write in a workload that plans on its own
_BERT = "bert(layers = 1, hidden = 32, heads = 2)"


def _w(body: str, target: str = "device = cpu", model: str = _BERT, task: str = "pretrain") -> str:
    tokens = "max_new_tokens = 4 tokens" if task == "generate" else ""
    return (f"workload w {{\n  task {task} {{ {tokens} }}\n  model {model}\n  {body}\n"
            f"  measure {{ warmup = 1 steps  steps = 2 steps }}\n  target t {{ {target} }}\n}}\n")


_LLAMA = "llama(layers = 4, hidden = 64, heads = 4)"
_TE = 'device = h100  precision fp8 { library = transformer_engine }'


def _fp8(body: str) -> str:
    return _w("", model=_LLAMA, target=f"device = h100  precision fp8 {{ {body} }}")


def _layout(layout: str, devices: int = 2, task: str = "pretrain", model: str = _LLAMA, device: str = "h100") -> str:
    return _w("", model=model, task=task, target=f"device = {device}  devices = {devices}  parallel = {layout}")


_GENERATE = {"task": "generate", "model": _LLAMA, "device": "a100"}
_VIT = "vit(layers = 1, hidden = 32, heads = 2, image_size = 32, patch = 8, classes = 10)"
_LLAMA_HF = 'hf("meta-llama/Meta-Llama-3-8B") {{ config = "{}" }}'
_SHARDED = "device = h100  devices = 8  parallel = fsdp  precision = bf16"

#: (table, key) -> pairs of workloads (with the key, without it or with another value) for keys
#: the walk cannot write in a workload that plans on its own
EXTRA: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("track", "experiment"): [(_w('track { tensorboard = on  experiment = "walk" }'),
                               _w("track { tensorboard = on }"))],
    ("model", "family"): [(_w("", model='local("m") { family = llama }'),
                           _w("", model='local("m") { family = mistral }'))],
    ("model", "config"): [(_w("", model=_LLAMA_HF.format("llama-16.json"), target=_SHARDED),
                           _w("", model=_LLAMA_HF.format(LLAMA_CONFIG), target=_SHARDED))],
    ("target", "device"): [(_w("", target="device = h100"), _w("", target="device = a100"))],
    ("target", "instance"): [(_w("", target="instance = p4d.24xlarge"), _w("", target="instance = p4de.24xlarge"))],
    ("target", "te_layers"): [(_w("", model=_LLAMA, target=f"{_TE}  te_layers = on"),
                               _w("", model=_LLAMA, target=_TE))],
    ("target", "te_version"): [(_w("", model=_LLAMA, target=f'{_TE}  te_version = "2.9"'),
                                _w("", model=_LLAMA, target=_TE))],
    ("optimize", "channels_last"): [(_w("optimize { channels_last = on }", model=_VIT), _w("", model=_VIT))],
    ("fp8", "format"): [(_fp8("format = e4m3"), _fp8("format = hybrid"))],
    ("fp8", "amax_history"): [(_fp8("amax_history = 16"), _fp8(""))],
    ("fp8", "amax_algo"): [(_fp8("amax_algo = most_recent"), _fp8(""))],
    ("fp8", "margin"): [(_fp8("margin = 1"), _fp8(""))],
    ("fp8", "library"): [(_fp8("library = torchao"), _fp8("library = transformer_engine"))],
    ("fp8", "recipe"): [(_fp8("library = torchao  recipe = rowwise"), _fp8("library = torchao"))],
    ("parallel", "offload_optimizer"): [(_layout("zero(stage = 2, offload_optimizer = cpu)"),
                                         _layout("zero(stage = 2)"))],
    ("parallel", "offload_param"): [(_layout("zero(stage = 3, offload_param = cpu)"), _layout("zero(stage = 3)"))],
    ("parallel", "sequence_parallel"): [(_layout("fsdp(tp = 2, sequence_parallel = on)"), _layout("fsdp(tp = 2)"))],
    ("parallel", "pp"): [(_layout("pipeline(pp = 2)", 4), _layout("pipeline(pp = 4)", 4))],
    ("parallel", "kernel_inject"): [(_layout("deepspeed_inference(tp = 2, kernel_inject = on)", **_GENERATE),
                                     _layout("deepspeed_inference(tp = 2)", **_GENERATE))],
}
#: keys whose row no pair can prove here, and why
NOT_PROVED = {
    ("model", "hub"): "online lets validate fetch config.json from the Hub, which is not reachable here",
    ("dataset", "config"): "a Hub dataset's config name: a Hub dataset's plan needs the Hub",
    ("dataset", "target_column"): "a Hub dataset's summary column (seq2seq): its plan needs the Hub",
}
#: what the planner resolves from a target as a whole: a target's, layout's or FP8 recipe's key
#: may move them
RESOLVED = ("backend", "strategy", "threads")
#: job fields compared whole (free-form dicts)
WHOLE = ("architecture", "model.stand_in", "model.real_shape", "debug.fake")


def _table_key(where: str, key: str) -> tuple[str, str] | None:
    if where == "parallel":
        return ("parallel", key.split(".", 1)[1]) if "." in key else None
    return (where, key) if where in S.KEY_TABLES and key in S.KEY_TABLES[where] else None


def _flat(d: dict, pre: str = "") -> dict:
    out = {}
    for k, v in d.items():
        path = pre + k
        if isinstance(v, dict) and v and path not in WHOLE:
            out.update(_flat(v, path + "."))
        else:
            out[path] = v
    return out


def _job(text: str, path: Path) -> tuple[dict, str] | None:
    """The flattened job of the file's one target and the rest of its plan (as JSON), or None
    when validate or plan refuses it."""
    path.write_text(text, encoding="utf-8")
    specs, diags = api.validate(path)
    if not specs or any(d.severity == "error" or d.code.startswith("E") for d in diags):
        return None
    try:
        plan = api.plan(specs[0], specs[0].targets[0])
    except AccelctlError:
        return None
    d = plan.to_dict()
    job = d.pop("job")
    job.pop("workload")
    spec = specs[0].to_dict() if hasattr(specs[0], "to_dict") else codec.to_dict(specs[0])
    for shown in ("name", "path", "origins"):
        spec.pop(shown, None)
    rest = re.sub(rf"\b{re.escape(specs[0].name)}\b", "<workload>", json.dumps([d, spec], sort_keys=True, default=str))
    return _flat(job), rest.replace(path.name, "<file>")


def _covers(path: str, lands: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + ".") or p.startswith(path + ".") for p in lands)


def _pairs(tmp_path: Path) -> dict[tuple[str, str], list[tuple[str, str, str]]]:
    """(table, key) -> (case id, other side, workload text) pairs for every key of the tables."""
    (tmp_path / "walk.txt").write_text("a line of text to train on\n" * 64, encoding="utf-8")
    (tmp_path / "m").mkdir()
    llama = json.loads(LLAMA_CONFIG.read_text(encoding="utf-8"))
    (tmp_path / "llama-16.json").write_text(json.dumps({**llama, "num_hidden_layers": 16}), encoding="utf-8")
    out: dict[tuple[str, str], list] = {}
    by_context: dict[tuple, list] = {}
    for case in cases(OTHER_VALUES):
        tk = _table_key(case.where, case.key)
        if tk is None:
            continue
        phrase = f"{tk[1]} = {case.value}"
        if phrase not in case.text:
            continue
        base = case.text.replace(phrase, "", 1)
        base = re.sub(r"\b(track|checkpoint) \{\s*\}", "", base)
        out.setdefault(tk, []).append((case.id, base, case.text))
        context = re.sub(r"^workload \w+", "workload w", base)
        by_context.setdefault((tk, case.device, case.task, context), []).append(case)
    for (tk, *_), same in by_context.items():  # the same workload with another value
        for a, b in zip(same, same[1:]):
            out[tk].append((f"{a.id} vs {b.value}", b.text, a.text))
    for tk, extra in EXTRA.items():
        out.setdefault(tk, []).extend((f"{tk[0]}.{tk[1]} (extra)", without, with_) for with_, without in extra)
    return out


@pytest.fixture(scope="module")
def proofs(tmp_path_factory):
    """(table, key) -> [(case, differing job fields, whether the rest of the plan or the checked
    workload differs)] for each pair whose both sides plan."""
    tmp = tmp_path_factory.mktemp("landing")
    jobs: dict[str, dict | None] = {}

    def job(text: str) -> tuple[dict, str] | None:
        if text not in jobs:
            jobs[text] = _job(text, tmp / f"{len(jobs)}.wl")
        return jobs[text]

    out = {}
    for tk, pairs in _pairs(tmp).items():
        got = []
        for case_id, a, b in pairs:
            ja, jb = job(a), job(b)
            if ja is not None and jb is not None:
                (ja, ra), (jb, rb) = ja, jb
                got.append((case_id, sorted(k for k in ja.keys() | jb.keys() if ja.get(k) != jb.get(k)), ra != rb))
        out[tk] = got
    return out


def test_every_key_row_says_where_it_lands_and_names_real_job_fields():
    job_fields = _flat({f.name: _fields_of(f.type) for f in fields(WorkerJob)})
    for table, keys in S.KEY_TABLES.items():
        for key in keys:
            lands, read_by = S.landing(table, key)
            assert lands or read_by, f"{table}.{key}: neither a job field nor what reads it"
            for p in lands:
                assert any(f == p or f.startswith(p + ".") for f in job_fields), f"{table}.{key}: no job field {p}"


def _fields_of(t) -> object:
    """A value type's fields as a nested dict (leaves: None), to name every job field; of a union
    (``Fp8Recipe | None``), its value type's."""
    for t in (t, *typing.get_args(t)):
        try:
            return {f.name: _fields_of(f.type) for f in fields(t)}
        except TypeError:
            continue
    return None


def test_each_key_lands_where_its_row_says_and_nowhere_else(proofs):
    wrong = []
    for (table, key), got in sorted(proofs.items()):
        lands, _ = S.landing(table, key)
        allowed = lands + (RESOLVED if table in ("target", "parallel", "fp8") else ())
        for case_id, diff, _ in got:
            stray = [d for d in diff if not _covers(d, allowed)]
            if stray:
                wrong.append(f"{case_id}: {table}.{key} also changed {stray} (its row: {lands or 'no job field'})")
    assert not wrong, "\n".join(wrong)


def test_every_row_is_proved_by_a_pair_that_moves_its_fields(proofs):
    unproved = []
    for table, keys in S.KEY_TABLES.items():
        for key in keys:
            lands, _ = S.landing(table, key)
            got = proofs.get((table, key), [])
            if lands:  # a pair moved its fields
                proved = any(any(_covers(d, lands) for d in diff) for _, diff, _ in got)
            else:  # a pair's plans or checked workloads differ, and not in the job
                proved = any(rest for _, _, rest in got)
            if (table, key) in NOT_PROVED:
                if proved:
                    unproved.append(f"{table}.{key} is proved now: take it out of NOT_PROVED")
            elif not proved:
                unproved.append(f"{table}.{key} ({lands or 'no job field'}): {got[:3]}")
    assert not unproved, "rows no pair of workloads proves:\n" + "\n".join(unproved)

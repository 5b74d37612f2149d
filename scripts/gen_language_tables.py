"""Generate the key tables and the diagnostics table of docs/language.md.

The tables are derived from the schema (``accelctl/language/schema.py``), the value
types (``accelctl/language/values.py``), the spec defaults (``accelctl/workload/types.py``)
and, for each diagnostic, a small example run through the real parser and checker
(the message shown is the one the tool prints).  A key's meaning is its row's, beside its type
in the schema (``VType.explained``); a test fails when a schema key has none.

    PYTHONPATH=. .venv/bin/python scripts/gen_language_tables.py           # rewrite docs/language.md
    PYTHONPATH=. .venv/bin/python scripts/gen_language_tables.py --check   # exit 1 if it is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelctl.dsl.parser import parse
from accelctl.errors import WorkloadError
from accelctl.frozen import fields
from accelctl.language import plugins
from accelctl.language import schema as S
from accelctl.workload import types as T
from accelctl.language.check import check_all
from accelctl.language.stack import SDKS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "language.md"
BEGIN = "<!-- BEGIN GENERATED: {name} (scripts/gen_language_tables.py) -->"
END = "<!-- END GENERATED: {name} -->"

# ----------------------------------------------------------------------------- key meanings

#: the DeepSpeed launcher block's settings (backend deepspeed's, not an engine: an engine's
#: meanings are in its row, ``accelctl.language.plugins.EngineRow.meanings``)
LAUNCHER_MEANINGS: dict[str, str] = {
    "hosts": "host names (written to the hostfile)", "hostfile": "an existing hostfile",
    "master_addr": "address of rank 0", "master_port": "port of rank 0", "ssh": "launch over ssh",
    "launcher": "DeepSpeed multi-node launcher",
}


def engine_meanings(block: str) -> dict[str, str]:
    """What each setting of ``engine <block> { }`` means: the engine row's, or the launcher's."""
    return dict(plugins.engine_row(block).meanings) if block in plugins.ENGINES else LAUNCHER_MEANINGS

# dataclass that holds each table's defaults (a key's field there: ``schema.FIELD_NAMES`` where
# the names differ)
DEFAULTS_FROM: dict[str, type] = {
    "workload": T.WorkloadSpec, "task": T.TaskSpec, "model": T.ModelSpec, "dataset": T.DatasetSpec,
    "fp8": T.Fp8Recipe, "batch": T.BatchSpec, "optimizer": T.OptimizerSpec, "measure": T.MeasureSpec,
    "checkpoint": T.CheckpointSpec, "optimize": T.OptimizeSpec, "track": T.TrackSpec, "target": T.TargetSpec,
    "parallel": T.ParallelSpec,
}


def schema_tables() -> dict[str, dict]:
    return S.KEY_TABLES


def _fmt_default(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str):
        return value if value else '""'
    return f"{value:g}" if isinstance(value, float) else str(value)


def missing_meanings() -> list[str]:
    """Schema keys without a meaning (a new key's row in accelctl/language/schema.py needs its
    ``.explained(...)``, an engine's setting one in its row's ``meanings``), and engines without a
    summary."""
    out = [f"{t} key '{k}'" for t, keys in schema_tables().items() for k, vt in keys.items() if not vt.meaning]
    out += [f"engine {b} key '{k}'" for b, table in S.ENGINE_KEYS.items() for k in table
            if k not in engine_meanings(b)]
    out += [f"engine {n} (its row's summary)" for n in plugins.ENGINES if not plugins.engine_row(n).summary]
    return out


def default_of(table: str, key: str) -> str:
    default = schema_tables()[table][key].unset
    if default is not None:
        return default
    field = {f.name: f for f in fields(DEFAULTS_FROM[table])}[S.FIELD_NAMES.get((table, key), key)]
    return _fmt_default(field.default)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def landing_cell(table: str, key: str) -> str:
    """Where a key lands in the job: its ``job.json`` fields, else what reads it."""
    lands, read_by = S.landing(table, key)
    if not lands:
        return f"— ({read_by})"
    return ", ".join(f"`{p}`" for p in lands) + (f" ({read_by})" if read_by else "")


def key_table(table: str) -> str:
    rows = ["| key | type | accepts | default | meaning | in the job |", "|---|---|---|---|---|---|"]
    for key, vt in schema_tables()[table].items():
        kind = vt.name if not vt.name.startswith("one of") else "choice"
        extra = ""
        if table == "task":
            extra = f" *({'/'.join(S.TASK_KEYS[key][1])})*"
        rows.append(f"| `{key}` | {kind} | {_cell(vt.detail)} | {_cell(default_of(table, key))} | "
                    f"{_cell(vt.meaning)}{extra} | {_cell(landing_cell(table, key))} |")
    return "\n".join(rows)


def engine_tables() -> str:
    out = []
    for engine, table in S.ENGINE_KEYS.items():
        meanings = engine_meanings(engine)
        what = plugins.engine_row(engine).summary if engine in plugins.ENGINES else (
            "the DeepSpeed launcher of backend deepspeed, under the target's engine")
        out.append(f"**engine {engine}** — {what}" + ("; no settings" if not table else ""))
        out.append("")
        if table:
            out += ["| key | type | accepts | meaning |", "|---|---|---|---|"]
            for key, vt in table.items():
                kind = vt.name if not vt.name.startswith("one of") else "choice"
                out.append(f"| `{key}` | {kind} | {_cell(vt.detail)} | {_cell(meanings[key])} |")
            out.append("")
    return "\n".join(out).rstrip()


# ----------------------------------------------------------------------------- diagnostics

BASE = "workload w {\n  task pretrain { }\n  model bert()\n"

#: (code, meaning, example, mode): mode "line" puts the example inside a minimal
#: pretrain workload; "file" uses it as the whole file; "arg" parses the command line's last
#: argument; "over" checks what that argument names against the minimal workload with a
#: target cpu; "text" is shown as is (not run)
DIAGNOSTICS: list[tuple[str, str, str, str]] = [
    ("E001", "no such file (also a broken symbolic link, or a path through a file: `ok.wl/x`)",
     "accelctl validate nope.wl", "text"),
    ("E002", "the file cannot be read: not a regular file (a directory, a FIFO, a socket, a device such as "
     "`/dev/zero`), a symbolic link loop, a name too long, no permission, not UTF-8", "accelctl validate workloads/",
     "text"),
    ("E003", "a number that cannot be represented: beyond ±1.8e308, or over 4,300 digits",
     "optimizer adamw(lr = 1e309)", "line"),
    ("E004", "the file is over the size limit (1 MiB); refused before it is read (or once more than that is read)",
     "accelctl validate huge.wl", "text"),
    ("E005", "brackets, calls or blocks nested over 100 levels deep", "description = [[[ ... 101 levels ... ]]]",
     "text"),
    ("E006", "more than 1,000 errors in one file: the first 1,000 are reported, this one counts the rest",
     "a = 1  (on 1,002 lines)", "text"),
    ("E100", "syntax error: unexpected token or end of file", "workload w { x = 1 ) }", "file"),
    ("E101", "missing `}`: a block is never closed", "workload w { task pretrain {", "file"),
    ("E102", "bad string: unterminated, or single-quoted", "workload w { prompt = 'hi' }", "file"),
    ("E103", "missing `=` between key and value", "workload w { steps 5 }", "file"),
    ("E104", "a character that starts no token", "workload w { x = 1 @ 2 }", "file"),
    ("E105", "missing value after `=` or in a call", "workload w { x = }", "file"),
    ("E106", "a setting outside any `workload NAME { ... }`", "precision bf16", "file"),
    ("E107", "unmatched `}`", "workload w { } }", "file"),
    ("E108", "a unit where no number precedes it", "workload w { x = f(a GB) }", "file"),
    ("E201", "unknown block", "tasks { }", "line"),
    ("E202", "unknown key (or fp8 recipe settings on another precision); in a `--set`/`--over` key path also a "
             "workload's name (`-w` picks the workload) or an engine no block is of (`engine.NAME.KEY`)",
     "measure { warmpu = 3 }", "line"),
    ("E203", "unknown value of a choice (precision, task, optimizer, strategy ...)", "precision bf61", "line"),
    ("E204", "duplicate key, argument, engine, or batch size given twice", "measure { steps = 3  steps = 4 }",
     "line"),
    ("E205", "duplicate target", "target cpu { }\n  target cpu { }", "line"),
    ("E206", "duplicate workload", "workload w { task pretrain { } model bert() }\n"
                                   "workload w { task pretrain { } model bert() }", "file"),
    ("E207", "missing required part: task, model, max_new_tokens, a target's device, a name",
     "workload w { task pretrain { } }", "file"),
    ("E208", "a setting written without `=`", "measure { steps five }", "line"),
    ("E209", "a setting written as a block, or a block written as a setting; a `--set`/`--over` key path that "
             "ends at a block (`target.NAME`, `batch`) or `--set target=` (`-t` picks the target)",
     "batch micro", "line"),
    ("E210", "unknown argument of a call", "optimizer sgd(lr = 0.1, mom = 0.9)", "line"),
    ("E211", "unknown model architecture", "workload w { task pretrain { } model bret() }", "file"),
    ("E212", "no workload in the file", "# empty", "file"),
    ("E213", "the architecture of a Hub model cannot be told",
     'workload w { task pretrain { } model hf("someone/unknown") }', "file"),
    ("E214", "positional argument where names are needed; hf()/local()/files() need one string",
     "optimizer sgd(0.1)", "line"),
    ("E222", "`channels_last` on a model without image input", "optimize { channels_last = on }", "line"),
    ("E223", "`compile_mode` where `compile` is off", "optimize { compile_mode = max-autotune }", "line"),
    ("E224", "`compile = on` for generation without `kv_cache = static` (a growing cache recompiles every token)",
     "workload w { task generate { max_new_tokens = 5 } model gpt2()\n  optimize { compile = on } }", "file"),
    ("E225", "`compile = on` with fewer than 2 warm-up steps (compilation would land in a measured step)",
     "optimize { compile = on }\n  measure { warmup = 1  steps = 5 }", "line"),
    ("E226", "`accelctl compare` refuses a run that is not a complete measurement: incomplete, failed, stopped, "
             "unreadable, or a `repeat` series with a run missing (`--force` compares anyway; exit 2)",
     "accelctl compare A B (B has no summary.json)", "text"),
    ("E227", "`accelctl compare` refuses runs of different workloads, or of one workload whose model, task, data, "
             "optimizer or seed changed (`--force` compares anyway; exit 2)",
     "accelctl compare A B (B ran another workload)", "text"),
    ("E231", "`sweep --over KEY=V1,V2` / `--set KEY=VALUE`: an argument that is not a key path and its value(s) "
             "(no `=`, no value, a key that is not a dotted path of the language's names -- an empty part, a "
             "non-ASCII letter: positioned at that part --, several values for `--set`)",
     "accelctl sweep F --over micro", "arg"),
    ("E232", "`--set KEY=VALUE`: the setting cannot be written into the file's text so that it means what the "
             "setting means (the edited file re-parsed and checked differs): edit the file itself",
     "accelctl plan F --set KEY=VALUE", "text"),
    ("E597", "a target the workload does not have, named by `--target T` (`plan`, `run`, `estimate`, `sweep`, "
             "`doctor --plan`: positioned at its first target) or by a `--set`/`--over` key path "
             "(`target.NAME.KEY`, `--over target=a,b`: positioned at the name in the argument; a sweep's "
             "`target.NAME.KEY` must name a target it evaluates); the hint names the closest (exit 1)",
     "accelctl plan F --set target.cpuu.devices=2", "over"),
    ("E235", "`checkpoint` on a generate/infer task", "workload w { task generate { max_new_tokens = 5 } "
                                                      "model bloom()\n  checkpoint { every = 5 steps } }", "file"),
    ("E236", "`checkpoint` without `every`", "checkpoint { keep = 3 }", "line"),
    ("E240", f"`stack`: an SDK accelctl does not know ({', '.join(SDKS)}), not written as `name(\"VERSION\")`, "
             "or one the target's device does not run", 'target a { device = a100  stack { sdk = synapseai("1.8.0") } }',
     "line"),
    ("E241", "`stack`: a package accelctl does not know in `packages { }`, or both `deepspeed` and `habana-deepspeed`",
     'stack { packages { transformer = "4.43.4" } }', "line"),
    ("E242", "`stack`: a version that is not one release (a range, a wildcard)",
     'stack { packages { transformers = ">=4.43" } }', "line"),
    ("E243", "`xla_use_bf16 = on` on a target that does not run bf16", "target t { device = trn1  xla_use_bf16 = on }",
     "line"),
    ("E592", "`track`: an MLflow URI whose scheme is not `sqlite:///`, `file:`, `http://` or `https://` (or "
             "without a host), or a block that names no tracker", 'track { mlflow = "ftp://host/mlruns" }', "line"),
    ("E593", "`track`: not a W&B project name", 'track { wandb = "team/project" }', "line"),
    ("E301", "wrong type of value", 'measure { steps = "ten" }', "line"),
    ("E302", "wrong unit", "measure { steps = 10 GB }", "line"),
    ("E303", "missing unit", "target g { device = a100  memory = 96 }", "line"),
    ("E304", "value out of range (or an empty string)", "measure { repeat = 0 }", "line"),
    ("E306", "a whole number was needed", "measure { steps = 2.5 }", "line"),
    ("E215", "not a host name (RFC 1123) or IP address", 'engine deepspeed { hosts = ["node 1"] }', "line"),
    ("E216", "a name, path or id with a character its field cannot take (shell syntax, a leading '-')",
     'engine slurm { partition = "debug; rm -rf /" }', "line"),
    ("E217", "not HOST:PORT", 'engine torchrun { rdzv_endpoint = "node0" }', "line"),
    ("E218", "a control character in a string (tab and newline are allowed)", 'description = "a\\x01b"', "text"),
    ("E109", "a name, number, unit or string no workload text can hold (a name that is not a NAME token, a "
             "number that is not an int or a float, a string that is not UTF-8): only an AST made by a program, "
             "or read from anywhere but the text, holds one; the checker refuses it at its place",
     "api.check(File with Word(name='a b'))", "text"),
    ("E401", "global batch ≠ micro × accumulation × data-parallel size",
     "batch { micro = 8  global = 100 }\n  target cpu { devices = 2 }", "line"),
    ("E402", "nodes × devices not divisible by tensor × pipeline parallel",
     "target g { device = a100  devices = 6  parallel = tensor(tp = 4) }", "line"),
    ("E403", "ZeRO stage outside 0–3", "target g { device = a100  parallel = zero(stage = 4) }", "line"),
    ("E404", "warm-up not fewer than the counted steps", "measure { warmup = 10  steps = 5 }", "line"),
    ("E405", "generation setting on a training task", "workload w { task pretrain { max_new_tokens = 5 } "
                                                      "model bert() }", "file"),
    ("E406", "setting that does not apply to the task (training setting on generate/infer, optimizer on "
             "inference, batch_size on training, target_column without seq2seq)",
     "workload w { task generate { max_new_tokens = 5  train_steps = 10 } model gpt2() }", "file"),
    ("E407", "an architecture's sizes at odds with each other: hidden not divisible by heads (without head_dim), "
             "more key/value heads than heads or heads not a multiple of them, experts_per_token past experts",
     "workload w { task pretrain { } model bert(hidden = 65, heads = 4) }", "file"),
    ("E408", "the model family cannot do the task", "workload w { task generate { max_new_tokens = 5 } "
                                                   "model bert() }", "file"),
    ("E409", "stand-in or family does not match the model's architecture",
     'workload w { task pretrain { } model hf("bert-large-uncased") { stand_in = gpt2() } }', "file"),
    ("E410", "ZeRO offload needs a higher stage",
     "target g { device = a100  parallel = zero(stage = 0, offload_optimizer = cpu) }", "line"),
    ("E411", "parallel strategy does not fit the task (inference TP for training, ZeRO or sequence parallel for "
             "inference)",
     "target g { device = a100  parallel = deepspeed_inference(tp = 1) }", "line"),
    ("E416", "parallel layout the model cannot take: tp not dividing its heads or key/value heads (Trainium/"
     "Inferentia: neuronx-distributed replicates key/value heads, and pads query heads outside training), pp over its "
     "layers, a family without a tensor-parallel or pipeline plan, one_f_one_b with fewer micro-batches than stages, "
     "sequence parallel without tp > 1 or over a sequence tp does not divide",
     "target g { device = a100  devices = 8  parallel = tensor(tp = 8) }", "line"),
    ("E412", "dataset path does not exist", 'dataset files("no/such/dir")', "line"),
    ("E413", "model path does not exist (and no stand_in)",
     'workload w { task pretrain { } model local("no/such/model") }', "file"),
    ("E425", "an accelerator target of a Hub or local model whose real shape is unknown (no `shape`, no "
             "config.json found): it would be planned and priced as the stand-in",
     'workload w { task pretrain { } model hf("someone/unknown-7b") { family = llama } '
     'target g { device = h100 } }', "file"),
    ("E426", "the model's config.json cannot be used: no such file, not a regular file, over 4 MiB, not UTF-8 "
             "or JSON, a size missing, not a whole number from 1 to 10_000_000, or sizes at odds (as E407); or "
             "(a config the workload names) a model_type without formulas whose transformers class cannot be read: "
             "torch or transformers not installed (pip install 'accelctl[run]'), a model_type transformers does not "
             "know (remote code is never run), a class that is no causal LM", 'workload w { task pretrain { } model hf("someone/x") '
                                         '{ family = llama  config = "no/such/config.json" } }', "file"),
    ("W426", "warning: `hub = online`, but config.json could not be fetched (no network, HF_HUB_OFFLINE, "
             "a timeout), or one found on its own (a local model's folder, the HF cache) has a model_type without "
             "formulas whose transformers class cannot be read (as E426): the shape is unknown",
     'workload w { task pretrain { } model hf("someone/x") { family = llama  hub = online } }', "file"),
    ("E414", "a catalogued Hub dataset without the config name it requires, or a config name on a dataset "
             "not from the Hub", 'dataset hf("cnn_dailymail")', "line"),
    ("E415", "a config name, split or column the catalogued Hub dataset does not have",
     'dataset hf("cnn_dailymail") { config = "3.0.0"  split = "dev" }', "line"),
    ("E501", "fp8 asked of a device that cannot do it", "target g { device = a100  precision = fp8 }", "line"),
    ("E502", "unknown device kind", "target g { device = a1000 }", "line"),
    ("E503", "unknown instance type (without a device = to say what it holds)",
     "target g { instance = p9.48xlarge }", "line"),
    ("E504", "more devices per node than the instance has", "target g { instance = p4d.24xlarge  devices = 16 }",
     "line"),
    ("E505", "backend option for another kind of device", "target g { device = a100  hpu_graphs = on }", "line"),
    ("E506", "the Neuron SDK cannot train convolutional models (today only reachable with E408)",
     "workload w { task pretrain { } model stable_diffusion() target trn { device = trn1 } }", "file"),
    ("E507", "device does not match the instance type", "target g { instance = p5.48xlarge  device = a100 }",
     "line"),
    ("E508", "unknown engine", "target g { device = a100  engine = lsf }", "line"),
    ("W601", "warning: bf16/fp16 on a CPU target (slow without native bf16)", "precision bf16", "line"),
    ("W602", "warning: torchao float8 on a GPU target without `optimize { compile = on }` (eager, its casts and "
             "amax reductions made ViT-H/14 0.32x of bf16 on an H100: docs/device-runs.md)",
     "workload w { task pretrain model gpt2() dataset synthetic(seq_len = 16 tokens) optimizer adamw(lr = 0.001)\n"
     "  precision fp8 { library = torchao }\n  target g { device = h100 } }", "file"),
]


def _errors_past_the_limit(more: int) -> str:
    """E006's message when ``more`` errors are past the limit (``accelctl.language.values.Ctx``)."""
    from accelctl.language.values import MAX_ERRORS, Ctx

    ctx = Ctx("example.wl")
    for _ in range(MAX_ERRORS + more):
        ctx.error("E202", "unknown key 'a'", None)
    return ctx.not_shown()[0].message


def run_example(code: str, example: str, mode: str) -> str:
    """The message the tool prints for the example (or a fixed text for file errors)."""
    if mode == "text":
        from accelctl.dsl.parser import MAX_NESTING
        from accelctl.dsl.source import too_large

        return {"E001": "no such file: nope.wl",
                "E002": "cannot read workloads/: it is a directory, not a regular file",
                "E004": too_large(20 * 2**20, "huge.wl").message,
                "E005": f"nesting deeper than {MAX_NESTING} levels",
                "E006": _errors_past_the_limit(2),
                "E218": "description holds the control character \\x01",
                "E109": "'a b' is not a name",
                "E226": "not compared: B (RUN_ID) is incomplete: only complete runs are compared",
                "E227": "not compared: different workloads: A ran bert, B ran t5",
                "E232": "--set KEY=VALUE: the setting cannot be written into F as it reads (the edited file would "
                        "mean something else)"}[code]
    if mode == "arg":  # a command-line argument, checked by the same parser as a file
        from accelctl.language.over import parse_over

        try:
            parse_over(example.rsplit(" ", 1)[-1])
        except WorkloadError as exc:
            return exc.diagnostics[0].message
        raise AssertionError(f"example of {code} does not produce it")
    if mode == "over":  # what a --set/--over argument names (accelctl.language.over.check_names)
        from accelctl.language.over import check_names, parse_over

        flag, arg = example.rsplit(" ", 2)[-2:]
        file = parse(BASE + "  target cpu { }\n}\n", "example.wl")
        for d in check_names(file.workloads, [parse_over(arg, flag=flag)]):
            if d.code == code:
                return d.message
        raise AssertionError(f"example of {code} does not produce it")
    text = BASE + f"  {example}\n}}\n" if mode == "line" else example + "\n"
    try:
        diags = check_all(parse(text, "example.wl"))[1]
    except WorkloadError as exc:
        diags = exc.diagnostics
    for d in diags:
        if d.code == code:
            return d.message
    raise AssertionError(f"example of {code} does not produce it: {[d.code for d in diags]}")


def diagnostics_table() -> str:
    rows = ["| code | meaning | example | message |", "|---|---|---|---|"]
    for code, meaning, example, mode in sorted(DIAGNOSTICS, key=lambda d: d[0]):
        shown = example.replace("\n  ", " ").replace("\n", " ")
        rows.append(f"| {code} | {_cell(meaning)} | `{_cell(shown)}` | {_cell(run_example(code, example, mode))} |")
    return "\n".join(rows)


# ----------------------------------------------------------------------------- catalogs

def units_table() -> str:
    from accelctl.language.values import UNITS

    rows = ["| dimension | units | converted to |", "|---|---|---|"]
    base = {"bytes": "bytes", "time": "seconds", "price": "USD per hour", "steps": "a count",
            "tokens": "a count", "samples": "a count", "bandwidth": "bits per second", "flops": "FLOP/s"}
    for dim, units in UNITS.items():
        rows.append(f"| {dim} | {', '.join(f'`{u}`' for u in units)} | {base[dim]} |")
    return "\n".join(rows)


def families_table() -> str:
    from accelctl.models.catalog import FAMILIES

    rows = ["| family | built with | tasks | shape keys (stand-in defaults) |", "|---|---|---|---|"]
    for f in FAMILIES.values():
        shape = ", ".join(f"`{k}` = {v:g}" if isinstance(v, float) else f"`{k}` = {v}" for k, v in f.shape.items())
        if f.from_module:
            shape = "none written: read from transformers' own class for the config.json's model_type (below)"
        rows.append(f"| `{f.name}` | {f.library} | {', '.join(f.tasks)} | {shape} |")
    return "\n".join(rows)


def known_models_table() -> str:
    from accelctl.models.catalog import KNOWN_MODELS

    rows = ["| Hub id | family | parameters (published) | architecture (what accelerator targets build) |",
            "|---|---|---|---|"]
    for m in KNOWN_MODELS.values():
        arch = ", ".join(f"`{k}` = {v}" for k, v in m.shape.items())
        rows.append(f"| `{m.hub_id}` | {m.family} | {m.params / 1e9:.3g} B | {arch} |")
    return "\n".join(rows)


def devices_table() -> str:
    from accelctl.catalog import DEVICES

    rows = ["| device | vendor | runtime | memory | fp8 | note |", "|---|---|---|---|---|---|"]
    for d in DEVICES.values():
        mem = f"{d.memory_bytes / 1e9:g} GB" if d.memory_bytes else "host"
        rows.append(f"| `{d.name}` | {d.vendor} | {d.adapter} | {mem} | {'yes' if d.fp8 else 'no'} | "
                    f"{_cell(d.note)} |")
    return "\n".join(rows)


def instances_table() -> str:
    from accelctl.catalog import INSTANCES

    rows = ["| instance | device × count | vCPUs | usd/h | price source |", "|---|---|---|---|---|"]
    for i in INSTANCES.values():
        price = f"{i.price_per_hour:g}" if i.price_per_hour is not None else "—"
        rows.append(f"| `{i.name}` | {i.device} × {i.devices} | {i.vcpus} | {price} | {_cell(i.price_source)} |")
    return "\n".join(rows)


def parallel_table() -> str:
    rows = ["| strategy | arguments | meaning |", "|---|---|---|"]
    meaning = {
        "none": "one replica per process, no gradient exchange (single device)",
        "data": "data parallel (DDP); alias `ddp`",
        "fsdp": "fully sharded data parallel (FSDP2: per-block `fully_shard`); with `tp` 2-D: tensor parallel "
                "inside a node, FSDP over the rest",
        "zero": "DeepSpeed ZeRO data parallel, stage 0–3, optional offload",
        "deepspeed_inference": "DeepSpeed-inference tensor (model) parallelism for generate/infer",
        "tensor": "tensor parallelism (the family's parallelize plan); replicas over the rest",
        "pipeline": "pipeline parallelism (contiguous blocks per stage); replicas over the rest",
    }
    for name, args in S.PARALLEL_STRATEGIES.items():
        shown = ", ".join(f"`{a}`" for a in args) or "—"
        rows.append(f"| `{name}` | {shown} | {meaning[name]} |")
    return "\n".join(rows)


# ----------------------------------------------------------------------------- document

def sections() -> dict[str, str]:
    missing = missing_meanings()
    if missing:
        raise SystemExit("scripts/gen_language_tables.py: add a meaning for " + ", ".join(missing))
    out = {f"keys-{t}": key_table(t) for t in schema_tables()}
    out["engines"] = engine_tables()
    out["engine-codes"] = engine_codes_table()
    out["units"] = units_table()
    out["families"] = families_table()
    out["known-models"] = known_models_table()
    out["devices"] = devices_table()
    out["instances"] = instances_table()
    out["parallel"] = parallel_table()
    out["stack"] = stack_table()
    out["diagnostics"] = diagnostics_table()
    return out


def engine_codes_table() -> str:
    """Each engine's plan-time refusal code, from its row."""
    rows = ["| code | meaning |", "|---|---|"]
    rows += [f"| {r.code} | {_cell(r.refuses)} |" for r in sorted(
        (plugins.engine_row(n) for n in plugins.ENGINES), key=lambda r: r.code) if r.code]
    return "\n".join(rows)


def stack_table() -> str:
    """The SDKs and packages a ``stack { }`` may name (accelctl.language.stack)."""
    from accelctl.plan.stack import requirement
    from accelctl.language import stack

    rows = ["| written | what | in the plan |", "|---|---|---|"]
    rows += [f'| `sdk = {k}("VERSION")` | {name} | note; on {adapter} devices only (E240) |'
             for k, (name, adapter) in stack.SDKS.items()]
    rows += [f'| `{k} = "VERSION"` | {_cell(what)} | `{_cell(requirement(k, "VERSION"))}` in requirements.txt |'
             for k, what in stack.PACKAGES.items()]
    return "\n".join(rows)


def render(doc: str) -> str:
    for name, body in sections().items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        if begin not in doc:
            raise SystemExit(f"{DOC}: marker missing: {begin}")
        head, _, rest = doc.partition(begin)
        _, _, tail = rest.partition(end)
        doc = f"{head}{begin}\n{body}\n{end}{tail}"
    return doc


def main(argv: list[str]) -> int:
    current = DOC.read_text(encoding="utf-8")
    fresh = render(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{DOC} is stale: run scripts/gen_language_tables.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""One test per diagnostic code: a minimal workload that triggers exactly that code.

Each case is a workload text with a marker ``‸`` placed where the diagnostic must
point (the marker is removed before parsing).  The text is written to a file and run
through the same path as ``accelctl validate``: ``parse_file`` then ``check_all``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accelctl.dsl.parser import MAX_NESTING
from accelctl.dsl.parser import MAX_SOURCE_BYTES, parse, parse_file
from accelctl.errors import Diagnostic, WorkloadError
from accelctl.language.check import check, check_all
from accelctl.language.values import MAX_ERRORS

MARK = "‸"
ROOT = Path(__file__).resolve().parents[2]

# the smallest valid workload; cases add one problem to it
BASE = "workload w {\n  task pretrain { }\n  model bert()\n"
GEN = "workload w {\n  task generate { max_new_tokens = 5 }\n  model gpt2()\n"


def wl(*lines: str, base: str = BASE) -> str:
    return base + "".join(f"  {line}\n" for line in lines) + "}\n"


# code -> list of (id, text with ‸ at the expected position, also-expected codes)
CASES: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    # ---------------------------------------------------------------- files
    "E001": [("no-such-file", None, ())],
    "E002": [("not-utf8", b'workload w { description = "\xff" }\n', ())],
    "E003": [("float-beyond-range", wl("optimizer adamw(lr = ‸1e309)"), ()),
             ("int-over-4300-digits", wl("seed = ‸" + "9" * 4301), ())],
    "E004": [("file-over-the-limit", MAX_SOURCE_BYTES + 1, ())],  # a sparse file of that size
    "E005": [("nesting-too-deep", wl("description = " + "[" * (MAX_NESTING - 1) + "‸[" + "]" * MAX_NESTING), ())],
    # 1,002 settings of one unknown key: 1,001 duplicates (E204) then the unknown key (E202); the first
    # MAX_ERRORS are reported, E006 counts the other 2 at the first of them
    "E006": [("errors-past-the-limit", wl(*["a = 1"] * (MAX_ERRORS + 1), "‸a = 1"), ("E204",) * MAX_ERRORS)],
    # ---------------------------------------------------------------- syntax
    "E100": [("stray-token", "workload w {\n  x = 1 ‸)\n}\n", ()),
             ("end-of-file", "workload ‸w", ())],
    "E101": [("missing-brace", "workload w ‸{\n  task generate {\n    max_new_tokens = 1\n  }\n", ())],
    "E102": [("unterminated-string", 'workload w {\n  prompt = ‸"DeepSpeed is\n}\n', ()),
             ("single-quotes", "workload w {\n  prompt = ‸'hi'\n}\n", ())],
    "E103": [("missing-equals", "workload w {\n  steps ‸5\n}\n", ())],
    "E104": [("bad-character", "workload w {\n  x = 1 ‸@ 2\n}\n", ())],
    "E105": [("missing-value", "workload w {\n  x = f(a = ‸)\n}\n", ())],
    "E106": [("setting-outside-workload", "‸precision bf16\n", ())],
    "E107": [("unmatched-brace", "workload w {\n}\n‸}\n", ())],
    "E108": [("unit-without-number", "workload w {\n  x = f(a ‸GB)\n}\n", ())],
    # ---------------------------------------------------------------- names
    "E201": [("unknown-block", wl("‸tasks { }"), ())],
    "E202": [("unknown-key", wl("measure { ‸warmpu = 3 }"), ()),
             ("unknown-workload-key", wl("‸colour = 3"), ())],
    "E203": [("unknown-value", wl("precision ‸bf61"), ()),
             ("unknown-task", "workload w {\n  task ‸pretrian { }\n  model bert()\n}\n", ())],
    "E204": [("duplicate-key", wl("measure { steps = 3  ‸steps = 4 }"), ()),
             ("duplicate-argument", wl("optimizer sgd(lr = 0.1, ‸lr = 0.2)"), ())],
    "E205": [("duplicate-target", wl("target cpu { }", "target ‸cpu { }"), ())],
    "E206": [("duplicate-workload", wl() + "workload ‸w {\n  task pretrain { }\n  model bert()\n}\n", ())],
    "E207": [("missing-model", "workload ‸w {\n  task pretrain { }\n}\n", ()),
             ("missing-task", "workload ‸w {\n  model bert()\n}\n", ()),
             ("missing-max-new-tokens", "workload w {\n  task ‸generate { }\n  model gpt2()\n}\n", ()),
             ("target-without-device", wl("target ‸mybox { devices = 1 }"), ())],
    "E208": [("setting-without-equals", wl("measure { ‸steps five }"), ()),
             ("fallback-without-equals", wl('dataset hf("cnn_dailymail") { config = "3.0.0"  ‸fallback synthetic }'), ())],
    "E209": [("setting-as-block", wl("measure { ‸steps { } }"), ()),
             ("measure-not-a-block", wl("‸measure = 5"), ())],
    "E210": [("unknown-argument", wl("optimizer sgd(lr = 0.1, ‸mom = 0.9)"), ())],
    "E211": [("unknown-architecture", "workload w {\n  task pretrain { }\n  model ‸bret()\n}\n", ())],
    "E212": [("no-workload", "‸# nothing here\n", ())],
    "E213": [("unknown-hub-model", 'workload w {\n  task pretrain { }\n  model ‸hf("someone/unknown")\n}\n', ())],
    "E214": [("positional-argument", wl("optimizer sgd(‸0.1)"), ()),
             ("hf-needs-a-string", "workload w {\n  task pretrain { }\n  model ‸hf(1)\n}\n", ())],
    # ---------------------------------------------------------------- types and units
    "E301": [("wrong-type", wl('measure { steps = ‸"ten" }'), ()),
             ("not-on-off", wl("gradient_checkpointing = ‸maybe"), ()),
             ("hub-fallback", wl('dataset hf("cnn_dailymail") { config = "3.0.0"  fallback = ‸hf("other") }'), ())],
    "E302": [("wrong-unit", wl("measure { steps = ‸10 GB }"), ()),
             ("wrong-unit-dimension", wl("target g { device = a100  price = ‸10 GB }"), ())],
    "E303": [("missing-unit", wl("target g { device = a100  memory = ‸96 }"), ())],
    "E304": [("out-of-range", wl("measure { repeat = ‸0 }"), ()),
             ("nodes-zero", wl("target g { device = a100  nodes = ‸0 }"), ()),
             ("negative-price", wl("target g { device = a100  price = ‸-1 usd/h }"), ())],
    "E306": [("not-whole", wl("measure { steps = ‸2.5 }"), ())],
    # ---------------------------------------------------------------- what a value names
    "E215": [("host-with-newline", wl('engine deepspeed { hosts = ["node-1", ‸"localhost\\nACCELCTL_EOF"] }'), ()),
             ("master-addr-not-a-host", wl('engine deepspeed { master_addr = ‸"-oProxyCommand=x" }'), ())],
    "E216": [("queue-with-shell-syntax", wl('engine aws_batch { job_queue = ‸"q; rm -rf /" }'), ()),
             ("hostfile-starting-with-dash", wl('engine deepspeed { hostfile = ‸"--x" }'), ()),
             ("hub-id-starting-with-dash", "workload w {\n  task pretrain { }\n  model hf(‸\"--trust_remote_code\") { stand_in = bert() }\n}\n", ())],
    "E217": [("endpoint-without-port", wl('engine torchrun { rdzv_endpoint = ‸"node0" }'), ())],
    "E218": [("control-character", wl('description = ‸"a\x00b"'), ())],
    # ---------------------------------------------------------------- cross-field rules
    "E401": [("global-batch", wl("batch { micro = 8  ‸global = 100 }", "target cpu { devices = 2 }"), ()),
             ("global-batch-in-target", wl("target g { device = a100  devices = 8  ‸batch { micro = 4  global = 64 } }"),
              ())],
    "E402": [("devices-not-divisible", wl("target g { device = a100  devices = 6  ‸parallel = tensor(tp = 4) }"), ())],
    "E403": [("zero-stage", wl("target g { device = a100  parallel = zero(‸stage = 4) }"), ())],
    "E404": [("warmup-not-fewer", wl("measure { ‸warmup = 10  steps = 5 }"), ()),
             ("warmup-equal-default-steps", wl("measure { ‸warmup = 10 steps }"), ())],
    "E405": [("generation-on-training", "workload w {\n  task pretrain { ‸max_new_tokens = 5 }\n  model bert()\n}\n", ()),
             ("kv-cache-on-finetune", "workload w {\n  task finetune { ‸kv_cache = on }\n  model t5()\n}\n", ())],
    "E406": [("training-on-generate",
              "workload w {\n  task generate { max_new_tokens = 5  ‸train_steps = 10 }\n  model gpt2()\n}\n", ()),
             ("optimizer-on-generate", wl("‸optimizer sgd", base=GEN), ()),
             ("batch-size-on-pretrain", "workload w {\n  task pretrain { ‸batch_size = 4 }\n  model bert()\n}\n", ()),
             ("target-column-without-seq2seq",
              wl('dataset hf("JulesBelveze/tldr_news") { column = "content"  ‸target_column = "headline" }'), ())],
    "E407": [("hidden-not-divisible", "workload w {\n  task pretrain { }\n  model ‸bert(hidden = 65, heads = 4)\n}\n", ()),
             ("more-kv-heads-than-heads", "workload w {\n  task pretrain { }\n  model ‸llama(heads = 4, kv_heads = 8)\n}\n",
              ()),
             ("experts-per-token-past-experts", 'workload w {\n  task pretrain { }\n  model hf("x/y") '
                                                 '{ shape = ‸mixtral(experts = 2, experts_per_token = 3) }\n}\n', ())],
    "E408": [("family-cannot-do-task", "workload w {\n  task generate { max_new_tokens = 5 }\n  ‸model bert()\n}\n", ())],
    "E409": [("stand-in-other-family",
              'workload w {\n  task pretrain { }\n  model hf("bert-large-uncased") { ‸stand_in = gpt2() }\n}\n', ())],
    "E410": [("offload-needs-zero", wl("target g { device = a100  parallel = ‸zero(stage = 0, offload_optimizer = cpu) }"),
              ())],
    "E411": [("inference-parallel-for-training", wl("target g { device = a100  ‸parallel = deepspeed_inference(tp = 1) }"),
              ()),
             ("zero-for-generation", wl("target g { device = a100  ‸parallel = zero(stage = 1) }", base=GEN), ()),
             ("sequence-parallel-for-generation",
              wl("target g { device = a100  devices = 2  ‸parallel = tensor(tp = 2, sequence_parallel = on) }",
                 base=GEN), ())],
    "E416": [("tp-not-dividing-heads", wl("target g { device = cpu  devices = 8  ‸parallel = tensor(tp = 8) }"), ()),
             ("pp-over-layers", wl("target g { device = cpu  devices = 4  ‸parallel = pipeline(pp = 4) }"), ()),
             ("family-without-tp-plan", 'workload w {\n  task pretrain { }\n  model t5()\n'
              '  target g { device = cpu  devices = 2  ‸parallel = fsdp(tp = 2) }\n}\n', ()),
             ("one-f-one-b-needs-micro-batches",
              wl("target g { device = cpu  devices = 2  ‸parallel = pipeline(pp = 2, schedule = one_f_one_b) }"), ()),
             ("sequence-parallel-without-tp", wl("target g { device = cpu  devices = 2  ‸parallel = fsdp(sequence_parallel = on) }"),
              ()),
             ("sequence-parallel-over-an-odd-sequence",
              wl("dataset synthetic { seq_len = 15 }",
                 "target g { device = cpu  devices = 2  ‸parallel = tensor(tp = 2, sequence_parallel = on) }"), ()),
             ("sequence-parallel-over-vit-class-token",
              'workload w {\n  task pretrain { }\n  model vit(layers = 2, hidden = 64, heads = 4, image_size = 32, patch = 8)\n'
              '  target g { device = cpu  devices = 2  ‸parallel = tensor(tp = 2, sequence_parallel = on) }\n}\n', ())],
    "E412": [("dataset-path-missing", wl('dataset files(‸"no/such/dir")'), ())],
    "E425": [("hub-model-without-shape-on-accelerator",
              'workload w {\n  task pretrain { }\n  model ‸hf("someone/unknown-7b") { family = llama }\n'
              '  target g { device = h100 }\n}\n', ())],
    "E426": [("config-path-missing", 'workload w {\n  task pretrain { }\n  model hf("someone/x") { family = llama  ‸config = '
                                     '"no/such/config.json" }\n}\n', ()),
             ("config-size-at-odds", 'workload w {\n  task pretrain { }\n  model hf("someone/x") { ‸config = "'
                                     + str(ROOT / "tests/data/hf_configs_bad/kv-heads-past-heads.json") + '" }\n}\n', ()),
             ("config-model-type-without-formulas", 'workload w {\n  task pretrain { }\n  model hf("someone/x") '
                                                     '{ family = llama  ‸config = "' + str(ROOT / "tests/data/hf_configs_unsupported"
                                                     / "mamba-130m.json") + '" }\n}\n', ())],
    "W426": [("hub-online-unreachable", 'workload w {\n  task pretrain { }\n  model ‸hf("someone/x") '
                                        '{ family = llama  hub = online }\n}\n', ())],
    "E413": [("model-path-missing", 'workload w {\n  task pretrain { }\n  model ‸local("no/such/model")\n}\n', ())],
    "E414": [("hub-config-missing", wl('dataset ‸hf("cnn_dailymail") { split = "train" }'), ()),
             ("hub-config-missing-alias", wl('dataset ‸hf("abisee/cnn_dailymail")'), ()),
             ("wikicorpus-config-missing", wl('dataset ‸hf("wikicorpus") { column = "text" }'), ()),
             ("config-on-synthetic", wl('dataset synthetic { ‸config = "3.0.0" }'), ())],
    "E415": [("hub-config-unknown", wl('dataset hf("cnn_dailymail") { config = ‸"3.0" }'), ()),
             ("hub-split-unknown", wl('dataset hf("cnn_dailymail") { config = "3.0.0"  split = ‸"dev" }'), ()),
             ("hub-column-unknown", wl('dataset hf("cnn_dailymail") { config = "3.0.0"  column = ‸"text" }'), ()),
             ("hub-target-column-unknown",
              'workload w {\n  task finetune { }\n  model t5()\n'
              '  dataset hf("cnn_dailymail") { config = "3.0.0"  target_column = ‸"summary" }\n}\n', ()),
             ("column-of-another-config", wl('dataset hf("wikicorpus") { config = "raw_en"  column = ‸"lemmas" }'), ())],
    # ---------------------------------------------------------------- checkpoints
    "E235": [("checkpoint-on-generate", wl("‸checkpoint { every = 5 steps }", base=GEN), ())],
    "E236": [("checkpoint-without-every", wl("‸checkpoint { keep = 3 }"), ())],
    "E240": [("unknown-sdk", wl('target g { device = gaudi2  stack { sdk = ‸synapse("1.8.0") } }'), ()),
             ("sdk-of-another-device", wl('target a { device = a100  stack { sdk = ‸synapseai("1.8.0") } }'), ())],
    "E241": [("unknown-package", wl('stack { packages { ‸transformer = "4.43.4" } }'), ()),
             ("two-deepspeeds", wl('stack { packages { deepspeed = "0.8.2"  ‸habana-deepspeed = "1.8.0" } }'), ())],
    "E242": [("version-range", wl('stack { packages { transformers = ‸">=4.43" } }'), ())],
    "E243": [("xla-use-bf16-in-fp32", wl("target t { device = trn1  ‸xla_use_bf16 = on }"), ())],
    # ---------------------------------------------------------------- optimize { }
    "E222": [("channels-last-on-text-model", wl("optimize { compile = on  ‸channels_last = on }"), ()),
             ("channels-last-in-a-target", wl("target cpu { devices = 1  optimize { ‸channels_last = on } }"), ())],
    "E223": [("compile-mode-without-compile", wl("optimize { ‸compile_mode = max-autotune }"), ()),
             ("target-turns-compile-off", wl("optimize { compile = on }",
                                             "target cpu { devices = 1  optimize { compile = off  "
                                             "‸compile_mode = default } }"), ())],
    "E224": [("compiled-generation-dynamic-cache", wl("optimize { ‸compile = on }", base=GEN), ()),
             ("compiled-generation-cache-off",
              "workload w {\n  task generate { max_new_tokens = 5  kv_cache = off }\n  model gpt2()\n"
              "  target cpu { devices = 1  optimize { ‸compile = on } }\n}\n", ())],
    "E225": [("compile-one-warmup-step", wl("optimize { ‸compile = on }", "measure { warmup = 1  steps = 5 }"), ()),
             ("target-measure-no-warmup", wl("optimize { ‸compile = on }",
                                             "target cpu { devices = 1  measure { warmup = 0  steps = 3 } }"), ())],
    # ---------------------------------------------------------------- experiment trackers
    "E592": [("mlflow-uri-of-another-scheme", wl('track { mlflow = ‸"ftp://host/mlruns" }'), ()),
             ("mlflow-http-without-host", wl('track { mlflow = ‸"http://" }'), ()),
             ("mlflow-file-store-mlflow-3-refuses", wl('track { mlflow = ‸"file:mlruns" }'), ()),
             ("track-naming-no-tracker", wl('‸track { experiment = "e" }'), ())],
    "E593": [("wandb-project-with-a-slash", wl('track { wandb = ‸"team/project" }'), ()),
             ("wandb-project-leading-dash", wl('track { wandb = ‸"-x" }'), ())],
    # ---------------------------------------------------------------- targets and devices
    "E501": [("fp8-on-a100", wl("target g { device = a100  ‸precision = fp8 }"), ()),
             ("fp8-inherited-on-gaudi1", wl("precision fp8", "target g { ‸device = gaudi }"), ())],
    "E502": [("unknown-device", wl("target g { device = ‸a1000 }"), ())],
    "E503": [("unknown-instance", wl("target g { instance = ‸p9.48xlarge }"), ())],
    "E504": [("too-many-devices", wl("target g { instance = p4d.24xlarge  ‸devices = 16 }"), ())],
    "E505": [("hpu-graphs-on-cuda", wl("target g { device = a100  ‸hpu_graphs = on }"), ())],
    # E506 is only reachable together with E408 with today's catalog: the only
    # convolutional family (stable_diffusion) cannot train at all.
    "E506": [("neuron-cnn-training",
              "workload w {\n  task pretrain { }\n  model stable_diffusion()\n  target trn { ‸device = trn1 }\n}\n",
              ("E408",))],
    "E507": [("instance-device-mismatch", wl("target g { instance = p5.48xlarge  ‸device = a100 }"), ())],
    "E508": [("unknown-engine", wl("target g { device = a100  engine = ‸lsf }"), ()),
             ("unknown-engine-block", wl("engine ‸lsf { }"), ())],
    # ---------------------------------------------------------------- warnings
    "W601": [("bf16-on-cpu", wl("‸precision bf16"), ())],
    "W602": [("torchao-fp8-uncompiled-on-a-gpu", wl("‸precision fp8 { library = torchao }", "target g { device = h100 }"),
              ())],
}

#: codes whose diagnostics carry no hint (the message says it all)
NO_HINT: set[str] = set()
#: cases where this particular variant has no hint
NO_HINT_CASES: set[str] = set()

PARAMS = [pytest.param(code, *case, id=f"{code}-{case[0]}") for code, cases in CASES.items() for case in cases]


def split_marker(text: str) -> tuple[str, tuple[int, int] | None]:
    """Remove the ‸ marker; return the text and the (line, column) it stood at."""
    if MARK not in text:
        return text, None
    before, _, after = text.partition(MARK)
    assert MARK not in after, "one marker per case"
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return before + after, (line, column)


def diagnose(path: Path) -> list[Diagnostic]:
    """What ``accelctl validate`` reports for a file: syntax errors, else every check diagnostic."""
    try:
        return check_all(parse_file(path))[1]
    except WorkloadError as exc:
        return exc.diagnostics


def run_case(text, tmp_path: Path) -> tuple[list[Diagnostic], Path, tuple[int, int] | None, str]:
    path = tmp_path / "case.wl"
    pos, source = None, ""
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif isinstance(text, int):  # a sparse file of that many bytes: refused by its size, unread
        with path.open("wb") as fh:
            fh.truncate(text)
    elif isinstance(text, str):
        source, pos = split_marker(text)
        path.write_text(source, encoding="utf-8")
    return diagnose(path), path, pos, source


@pytest.mark.parametrize("code, case_id, text, also", PARAMS)
def test_diagnostic(code, case_id, text, also, tmp_path):
    diags, path, pos, source = run_case(text, tmp_path)
    codes = [d.code for d in diags]
    assert sorted(codes) == sorted([code, *also]), "\n\n".join(d.render() for d in diags)
    d = next(d for d in diags if d.code == code)
    assert d.path == str(path)
    assert d.severity == ("warning" if code.startswith("W") else "error")
    assert d.message
    if pos is None:
        assert d.span is None or code in ("E002", "E004")
    else:
        assert (d.span.line, d.span.column) == pos, d.render()
        # the caret line of the rendering points at the same column
        lines = d.render().splitlines()
        assert lines[0].startswith(f"{path}:{pos[0]}:{pos[1]}: {d.severity}[{code}]: ")
        assert lines[1].endswith(source.splitlines()[pos[0] - 1].rstrip())
        caret = lines[2].split("| ", 1)[1]
        assert caret.index("^") == pos[1] - 1
    if code not in NO_HINT and case_id not in NO_HINT_CASES:
        assert d.hint.strip(), f"{code} ({case_id}) should say how to fix it"


def test_enough_distinct_codes_are_tested():
    assert len(CASES) >= 30


def test_every_code_the_sources_can_emit_is_tested():
    """Grep parser + check pass for codes; each one has a case here (and nothing stale)."""
    sources = [*sorted((ROOT / "accelctl/dsl").glob("*.py")), *sorted(p for d in ("language", "workload", "models") for p in (ROOT / "accelctl" / d).glob("*.py")),
                ROOT / "accelctl/catalog.py"]
    emitted = set()
    for src in sources:
        emitted |= set(re.findall(r'"([EW]\d{3})"', src.read_text(encoding="utf-8")))
    # the codes of command-line arguments (sweep --over, --set), which no workload text produces:
    # tested with their arguments in tests/decide/test_sweep_over.py, tests/language/test_settings.py and
    # tests/language/test_override_names.py (E597: a key path naming a target the workload lacks);
    # E109, an AST no text can give (made by a program, or a forged cache entry): tests/dsl/test_cache_trust.py
    assert emitted - ARGUMENT_CODES - NO_TEXT_CODES == set(CASES)


ARGUMENT_CODES = {"E231", "E232", "E597"}
NO_TEXT_CODES = {"E109"}


def test_required_kinds_of_problem_are_covered():
    required = {
        "missing brace": "E101", "missing =": "E103", "bad string": "E102", "stray token": "E100",
        "unknown block": "E201", "unknown key": "E202", "unknown value": "E203", "wrong type": "E301",
        "wrong unit": "E302", "duplicate key": "E204", "duplicate target": "E205", "duplicate workload": "E206",
        "missing required field": "E207", "out of range": "E304", "global batch": "E401",
        "devices vs tp x pp": "E402", "zero stage": "E403", "warm-up >= steps": "E404",
        "generation setting on training": "E405", "training setting on generation": "E406", "fp8": "E501",
    }
    assert set(required.values()) <= set(CASES)


# ------------------------------------------------------------------ all at once

MANY = """\
workload many {
  task pretrain { max_new_tokens = 5 }
  model bert(hidden = 64, heads = 4)
  precision bf61
  batch { micro = 8  global = 100 }
  measure { warmup = 20  steps = 10  repaet = 2 }
  target a { device = a100  devices = 6  parallel = tensor(tp = 4) }
  target b { device = a100  parallel = zero(stage = 5) }
  target c { device = a100  precision = fp8  memory = 80 }
  target c { device = gaudi2 }
  target d { device = h100  devices = 8 }
}
"""


def test_all_problems_reported_in_one_pass():
    diags = check_all(parse(MANY, "many.wl"))[1]
    got = [(d.code, d.span.line, d.span.column) for d in diags]
    assert got == [
        ("E405", 2, 19),  # max_new_tokens on a pretrain task
        ("E203", 4, 13),  # bf61
        ("E401", 5, 22),  # target b: 8 x 1 x 1 != 100 (points at the workload's global)
        ("E401", 5, 22),  # target c
        ("E401", 5, 22),  # target d: 8 x 1 x 8 = 64 != 100
        ("E404", 6, 13),  # warm-up 20 >= 10 steps
        ("E202", 6, 38),  # repaet
        ("E402", 7, 42),  # 6 devices, tp 4
        ("E403", 8, 45),  # stage 5
        ("E501", 9, 29),  # fp8 on a100
        ("E303", 9, 55),  # memory = 80 without a unit
        ("E205", 10, 10),  # duplicate target c
    ]
    assert [d.message.split(":")[0] for d in diags if d.code == "E401"] == ["target b", "target c", "target d"]
    codes = {d.code for d in diags}
    assert codes == {"E405", "E203", "E404", "E202", "E402", "E403", "E303", "E501", "E205", "E401"}
    # sorted by position
    assert [(d.span.line, d.span.column) for d in diags] == sorted((d.span.line, d.span.column) for d in diags)
    # check() raises them all together
    with pytest.raises(WorkloadError) as info:
        check(parse(MANY, "many.wl"))
    assert {d.code for d in info.value.diagnostics} == codes


def test_all_workloads_of_a_file_are_checked():
    text = wl("measure { steps = 0 }") + "workload v {\n  task pretrain { }\n  model bret()\n}\n"
    diags = check_all(parse(text, "two.wl"))[1]
    assert [d.code for d in diags] == ["E304", "E211"]


def test_warnings_do_not_fail_check():
    specs = check(parse(wl("precision bf16"), "w.wl"))
    assert [s.name for s in specs] == ["w"]


# ------------------------------------------------------------------ rendering

def test_rendered_diagnostic_has_location_source_line_caret_and_hint():
    text = wl("measure { warmpu = 3 }")
    (d,) = check_all(parse(text, "workloads/x.wl"))[1]
    out = d.render()
    assert out.splitlines() == [
        "workloads/x.wl:4:13: error[E202]: unknown key 'warmpu' in measure",
        " 4 |   measure { warmpu = 3 }",
        "   |             ^^^^^^",
        "  = hint: did you mean 'warmup'?",
    ]


def test_rendered_syntax_error():
    with pytest.raises(WorkloadError) as info:
        parse("workload w {\n  steps 5\n}\n", "s.wl")
    out = info.value.render()
    assert out.splitlines() == [
        "s.wl:2:9: error[E103]: missing '=' between key and value",
        " 2 |   steps 5",
        "   |         ^",
        "  = hint: write 'steps = 5'",
    ]


def test_validate_command_prints_every_diagnostic(tmp_path, capsys):
    from accelctl.cli import main

    p = tmp_path / "many.wl"
    p.write_text(MANY, encoding="utf-8")
    rc = main(["validate", str(p)])
    err = capsys.readouterr().err
    assert rc == 1
    for code in ("E405", "E203", "E404", "E202", "E402", "E403", "E303", "E501", "E205", "E401"):
        assert re.search(rf"^{re.escape(str(p))}:\d+:\d+: error\[{code}\]", err, re.M), code
    assert "  target b { device = a100  parallel = zero(stage = 5) }" in err
    assert re.search(r"^\s+\|\s+\^+$", err, re.M)


GLUED_BODY = "workload w {{\n  task pretrain\n  model gpt2()\n  {}\n  target cpu {{ }}\n}}\n"


@pytest.mark.parametrize("item, code, col, hint", [
    ("targetcpu { devices = 1 }", "E201", 3, "did you mean `target cpu`? (a space between the keyword and the name)"),
    ("taskpretrain { objective = mlm }", "E201", 3, "did you mean `task pretrain`?"),
    ("enginetorchrun { }", "E201", 3, "did you mean `engine torchrun`?"),
    ("precisionbf16", "E202", 3, "did you mean `precision bf16`?"),
    ("modelvit(layers = 1)", "E100", 11, "did you mean `model vit(...)`?"),
    ("datasetsynthetic(seq_len = 8 tokens)", "E100", 19, "did you mean `dataset synthetic(...)`?"),
    ("optimizeradamw(lr = 0.1)", "E100", 17, "did you mean `optimizer adamw(...)`?"),
    # not glued: a misspelt keyword keeps its nearest-name hint
    ("targets { devices = 1 }", "E201", 3, "did you mean 'target'?"),
    ("modeling = 3", "E202", 3, "did you mean 'model'?"),
    ("taskfoo { }", "E201", 3, "did you mean 'task'?"),  # foo is no task kind
])
def test_a_keyword_glued_to_its_name_inside_a_workload_is_an_error_with_a_hint(item, code, col, hint):
    """Issue 28: a keyword glued to a name is an error with a hint -- the top level's
    ``workloadfoo`` (tests/dsl/test_parser.py) and, here, the blocks and statements of a workload."""
    text = GLUED_BODY.format(item)
    with pytest.raises(WorkloadError) as info:
        check(parse(text))
    d = next(d for d in info.value.diagnostics if d.span.line == 4)
    assert (d.code, d.span.column) == (code, col), d.render()
    assert d.hint.startswith(hint), d.hint

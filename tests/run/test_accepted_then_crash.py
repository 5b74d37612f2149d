"""Every accepted value either works or is refused at its line (issue 22 #8).

* ``te_version = "banana"`` validated, then plan and run exited 70: refused by validate now,
  with the versions the plan knows;
* a BERT MLM with ``seq_len = 8`` and ``micro = 1`` failed ``loss is nan at step 1`` (a batch
  without a masked token): every sample has one now -- a real run;
* a stand-in ``seq_len`` over its positions, or a prompt plus ``max_new_tokens`` over GPT-2's,
  crashed the worker with an IndexError: refused at its line by ``plan`` (E532) where the plan
  knows the lengths, and a named ``sequence_too_long`` failure where only the tokenizer does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from accelctl.api import plan, validate_text
from accelctl.errors import PlanError
from accelctl.run.supervision import runner
from accelctl.language.te_versions import is_known
from accelctl.worker.data import mask_tokens
from accelctl.worker.models import ByteTokenizer
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]

FP8 = """workload v {
  task pretrain { objective = classification }
  model vit(layers = 2, hidden = 64, heads = 4, image_size = 32, patch = 8, classes = 10)
  precision bf16
  batch { micro = 16 }
  target h100 {
    device = h100
    te_version = %s
    te_layers = on
    precision fp8 { format = hybrid }
  }
}
"""


def _errors(text: str) -> list[tuple[str, int, int]]:
    _, diags = validate_text(text, "w.wl")
    return [(d.code, d.span.line, d.span.column) for d in diags if d.severity == "error"]


@pytest.mark.parametrize("version", ['"banana"', '"3.0"', '"2"', '"2.9.0rc1"', '"v2.9"', '"2.9 "', '"02.9"',
                                     '"2.9.1.1"', '""', '"２.９"', "2.9"])
def test_a_te_version_the_plan_does_not_know_is_refused_at_its_line(version):
    errors = _errors(FP8 % version)
    assert len(errors) == 1 and errors[0][1:] == (8, 18), errors
    _, diags = validate_text(FP8 % version, "w.wl")
    if version.startswith('"'):
        assert errors[0][0] == "E203" and "2.9" in diags[0].hint and "fp8_autocast" in diags[0].hint


@pytest.mark.parametrize("version", ["2.20", "2.20.2", "2.9", "2.8", "1.13", "0.12"])
def test_the_versions_the_plan_knows_validate_and_plan(version):
    specs, diags = validate_text(FP8 % f'"{version}"', "w.wl")
    assert not [d for d in diags if d.severity == "error"] and is_known(version)
    p = plan(specs[0], "h100")
    te = next(f for f in p.files if f.path == "te_recipe.json")
    assert f'"transformer_engine": "{version}"' in te.content


@pytest.mark.parametrize("seq", [1, 2, 3, 8])
def test_every_masked_lm_sample_predicts_at_least_one_position(seq):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 200, (4096, seq), generator=g)
    _, labels = mask_tokens(ids, ByteTokenizer(200), 200, 0.15, g)
    assert bool(((labels != -100).sum(dim=1) >= 1).all())
    assert bool((labels[labels != -100] == ids[labels != -100]).all())


def test_masking_of_long_rows_is_unchanged():
    """At seq_len 128 no row draws nothing: the draws are BERT's, as before the fix."""
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    ids = torch.randint(4, 200, (64, 128), generator=torch.Generator().manual_seed(1))
    inputs, labels = mask_tokens(ids, ByteTokenizer(200), 200, 0.15, g1)
    chosen = torch.rand(ids.shape, generator=g2) < 0.15
    assert bool(((labels != -100) == chosen).all())


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


MLM = """workload mlm8 {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2, vocab = 200)
  dataset synthetic(seq_len = %s tokens)
  precision fp32
  batch { micro = 1 }
  measure { warmup = 1 steps  steps = 12 steps }
  target cpu { threads = 1 }
}
"""


@pytest.mark.slow
def test_bert_mlm_with_8_tokens_and_micro_1_trains(tmp_path):
    wl = tmp_path / "mlm8.wl"
    wl.write_text(MLM % "8")
    r = _cli("run", str(wl), "--headless", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    assert "nan" not in r.stdout and "status: ok" in r.stdout


def test_a_stand_in_seq_len_over_its_positions_is_refused_at_its_line():
    specs, diags = validate_text(MLM % "1024", "w.wl")
    assert not [d for d in diags if d.severity == "error"]
    with pytest.raises(PlanError) as exc:
        plan(specs[0], "cpu")
    (d,) = exc.value.diagnostics
    assert (d.code, d.span.line) == ("E532", 4) and "512" in d.message
    specs, _ = validate_text((MLM % "512"), "w.wl")
    assert plan(specs[0], "cpu").job.data.seq_len == 512


GEN = """workload g {
  task generate {
    prompt         = %s
    max_new_tokens = %d tokens
    batch_size     = 1
  }
  model gpt2(layers = 1, hidden = 32, heads = 2, vocab = 300, max_positions = 64)
  precision fp32
  measure { warmup = 1 step  steps = 2 steps }
  target cpu { threads = 1 }
}
"""


@pytest.mark.parametrize("prompt,new,ok", [('"Hello"', 60, True), ('"Hello"', 61, False), ('"héllo"', 59, True),
                                           ('"héllo"', 60, False), ('"x"', 64, True), ('"x"', 65, False)])
def test_a_prompt_and_max_new_tokens_over_the_positions_are_refused_at_their_line(prompt, new, ok):
    """The byte stand-in tokenizer makes one token per UTF-8 byte: the plan counts exactly.  The
    model is fed prompt + max_new_tokens - 1 positions (the last new token is not fed back):
    GPT-2 of 64 positions generates 60 tokens after "Hello" and raises IndexError at 61."""
    specs, diags = validate_text(GEN % (prompt, new), "w.wl")
    assert not [d for d in diags if d.severity == "error"]
    if ok:
        assert plan(specs[0], "cpu").job.task.max_new_tokens == new
        return
    with pytest.raises(PlanError) as exc:
        plan(specs[0], "cpu")
    (d,) = exc.value.diagnostics
    assert (d.code, d.span.line, d.span.column) == ("E532", 4, 5) and "65 positions" in d.message


@pytest.mark.parametrize("prompt_len", [64, 70, 200])
def test_a_hint_never_asks_for_fewer_than_one_new_token(prompt_len):
    """A prompt that alone fills the positions (or is longer): the hint says to shorten it, and
    every number in it is one the language takes."""
    specs, _ = validate_text(GEN % ('"' + "x" * prompt_len + '"', 2), "w.wl")
    with pytest.raises(PlanError) as exc:
        plan(specs[0], "cpu")
    (d,) = exc.value.diagnostics
    assert d.code == "E532" and "-" not in d.hint.split("(")[0]
    assert ("at most 1," in d.hint) if prompt_len == 64 else "shorten the prompt to at most 63 tokens" in d.hint
    shorter = int(d.hint.split("at most ")[1].split()[0].rstrip(","))
    if prompt_len > 64:  # the hint's own number fits
        specs, _ = validate_text(GEN % ('"' + "x" * shorter + '"', 2), "w.wl")
        assert plan(specs[0], "cpu").job.task.max_new_tokens == 2


@pytest.mark.slow
def test_where_only_the_tokenizer_knows_the_worker_names_the_failure(tmp_path):
    """A job past the plan's check (as a Hub tokenizer's count would be): the worker stops
    with ``sequence_too_long`` before generating, not an IndexError."""
    specs, _ = validate_text(GEN % ('"Hello"', 60), "w.wl")
    p = plan(specs[0], "cpu")
    job = replace(p.job, task=replace(p.job.task, max_new_tokens=61))
    handle = runner.launch(replace(p, job=job), source_text=GEN, spec_json={"name": "g"},
                           runs_root=tmp_path)
    result = handle.wait(timeout=300)
    assert result.status == "failed"
    failure = result.summary["failure"]
    assert failure["reason"] == "sequence_too_long", failure
    assert "65 positions" in failure["message"] and "IndexError" not in str(result.summary)


@pytest.mark.slow
def test_a_training_sequence_only_the_worker_can_measure_is_a_named_failure(tmp_path):
    """A job past the plan's E532 (as a model known only by its Hub config would be): the
    worker stops with ``sequence_too_long`` before its first step."""
    specs, _ = validate_text(MLM % "512", "w.wl")
    p = plan(specs[0], "cpu")
    job = replace(p.job, data=replace(p.job.data, seq_len=1024))
    handle = runner.launch(replace(p, job=job), source_text=MLM, spec_json={"name": "mlm8"},
                           runs_root=tmp_path)
    result = handle.wait(timeout=300)
    failure = result.summary["failure"]
    assert result.status == "failed" and failure["reason"] == "sequence_too_long", failure
    assert "1024" in failure["message"] and "512" in failure["message"]

"""A plan as text (text, json, sh) and the diff of two plans: the one module both faces use."""

from __future__ import annotations

import json

import pytest

from accelctl.api import (
    check,
    diff_texts,
    parse,
    plan,
    plan_diff,
    refusal_header,
    render_plan,
    render_plan_sh,
    render_plan_text,
)

WL = """
workload tiny {
  task pretrain
  model bert(layers = 2, hidden = 32, heads = 2)
  batch { micro = 4 }
  measure { warmup = 1  steps = 3 }
  target cpu  { devices = 1 }
  target cpu2 { device = cpu  devices = 1  batch { micro = 8 } }
  target huge { device = cpu  devices = 1  memory = 1 MiB }
}
"""


@pytest.fixture(scope="module")
def spec():
    (spec,) = check(parse(WL, "tiny.wl"))
    return spec


def test_render_plan_formats(spec):
    p = plan(spec, "cpu")
    assert render_plan(p) == render_plan(p, "text") == render_plan_text(p)
    assert render_plan(p, "sh") == render_plan_sh(p)
    assert json.loads(render_plan(p, "json"))["target"] == "cpu"
    with pytest.raises(ValueError, match="unknown plan format 'yaml'"):
        render_plan(p, "yaml")


def test_plan_diff_of_two_targets(spec):
    diff = plan_diff(spec, "cpu", "cpu2")
    assert diff.startswith("--- target cpu\n+++ target cpu2\n@@")
    assert '-    "micro": 4' in diff and '+    "micro": 8' in diff
    assert plan_diff(spec, "cpu", "cpu") == "# targets cpu and cpu plan identically"


def test_plan_diff_against_a_target_that_cannot_be_planned(spec):
    diff = plan_diff(spec, "cpu", "huge")
    assert f"+{refusal_header('tiny', 'huge')}" in diff and "error[E530]" in diff


def test_diff_texts():
    assert diff_texts("a\nb\n", "a\nb\n", "x", "y", "same") == "same"
    assert diff_texts("a\nb", "a\nc", "x", "y", "same").splitlines() == ["--- x", "+++ y", "@@ -1,2 +1,2 @@", " a",
                                                                         "-b", "+c"]

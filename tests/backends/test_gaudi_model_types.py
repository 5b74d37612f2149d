"""The model types a Gaudi target runs from their own class are those optimum-habana optimizes:
``accelctl.backends.gaudi.model_types.OPTIMIZED`` is its 1.21.2's list, read here from the
installed optimum-habana's source (``.venv-habana``) where there is one, and the release and
the transformers it pins are the installed ones."""

from __future__ import annotations

import ast
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest

from accelctl.backends.gaudi import model_types

ROOT = Path(__file__).resolve().parents[2]
SITE = sorted((ROOT / ".venv-habana" / "lib").glob("python3*/site-packages"))


@pytest.mark.skipif(not SITE, reason="no .venv-habana: the installed optimum-habana cannot be read")
def test_the_list_is_the_installed_optimum_habanas():
    source = (SITE[0] / "optimum/habana/transformers/generation/utils.py").read_text(encoding="utf-8")
    listed = next(node.value for node in ast.parse(source).body if isinstance(node, ast.Assign)
                  and any(getattr(t, "id", "") == "MODELS_OPTIMIZED_WITH_STATIC_SHAPES" for t in node.targets))
    assert tuple(ast.literal_eval(listed)) == model_types.OPTIMIZED
    versions = {d.metadata["Name"].lower(): d.version for d in
                (PathDistribution(p) for p in SITE[0].glob("*.dist-info"))}
    assert versions["optimum-habana"] == model_types.OPTIMUM_HABANA
    assert tuple(int(x) for x in versions["transformers"].split(".")[:2]) < (4, 56)
    assert {"gemma2", "deepseek_v2"} <= set(model_types.OPTIMIZED) and "phi3" not in model_types.OPTIMIZED

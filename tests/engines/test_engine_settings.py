"""Engine settings are declared by each engine and read from there by the language (issue 28):
``engine <name> { ... }`` validates against the engine's own table, and ``validate`` imports
that small table, never the engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from accelctl.plan.registry import ENGINES
from accelctl.language import plugins
from accelctl.language import schema as S

ROOT = Path(__file__).resolve().parents[2]


def test_the_schema_reads_each_engines_own_declaration():
    assert set(ENGINES) == set(S.ENGINES)
    for name, engine in ENGINES.items():
        table = S.ENGINE_KEYS[name]
        assert list(table) == list(engine.settings), name
        assert all(table[k] is engine.settings[k] for k in table), name  # the engine's value types, not copies
    assert all(engine.row is plugins.engine_row(name) for name, engine in ENGINES.items())


def test_a_setting_the_engine_does_not_declare_is_refused_at_its_line():
    from accelctl.api import validate_text

    _, diags = validate_text('workload w { task pretrain  model gpt2(layers = 1, hidden = 32, heads = 2)\n'
                             '  dataset synthetic(seq_len = 8)  batch { micro = 1 }\n'
                             '  engine slurm { partiton = "debug" }\n'
                             '  target t { device = cpu  devices = 1  precision = fp32  engine = slurm } }')
    assert diags and diags[0].span.line == 3 and "partiton" in diags[0].message
    assert "partition" in (diags[0].hint or "")


def test_validate_imports_the_declarations_and_no_engine():
    code = ("import sys; import accelctl.language.check; "
            "print(sorted(m for m in sys.modules if m.startswith(('accelctl.engines', 'accelctl.backends'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    loaded = ast.literal_eval(out)
    declared = {where.partition(":")[0] for where in plugins.ENGINES.values()}
    assert set(loaded) == {"accelctl.engines", "accelctl.engines.settings", *declared}, loaded

"""The registry is a name -> module map: the plug-in table (``accelctl.language.plugins``) lists
every backend and engine once, the check pass offers exactly those names, and the registry
imports them from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.plan import registry
from accelctl.language import plugins, schema

ROOT = Path(__file__).resolve().parents[2]


def test_the_schema_offers_the_backends_of_the_plug_in_table_in_selection_order():
    assert schema.BACKENDS == tuple(plugins.BACKENDS) == tuple(registry.BACKENDS)
    assert schema.TARGET_KEYS["backend"].detail == ", ".join(plugins.BACKENDS)


def test_the_registry_holds_the_classes_the_table_names():
    engines = {name: plugins.engine_row(name).engine for name in plugins.ENGINES}
    for table, loaded in ((plugins.BACKENDS, registry.BACKENDS), (engines, registry.ENGINES)):
        for name, path in table.items():
            module, cls = path.split(":")
            obj = loaded[name]
            assert type(obj).__module__ == module and type(obj).__name__ == cls and obj.name == name


def test_a_row_whose_class_calls_itself_otherwise_is_refused():
    with pytest.raises(RuntimeError, match="calls itself 'torchrun'"):
        registry._load_all({"not_torchrun": plugins.BACKENDS["torchrun"]})


def test_the_plug_in_table_imports_no_plug_in():
    import ast
    from pathlib import Path

    tree = ast.parse(Path(plugins.__file__).read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    modules = [a.name for n in imports if isinstance(n, ast.Import) for a in n.names]
    modules += [n.module for n in imports if isinstance(n, ast.ImportFrom)]
    assert all(not m.startswith("accelctl.") or m == "accelctl.frozen" for m in modules), modules


def test_a_backends_tool_that_is_missing_is_reported_as_not_run(tmp_path, monkeypatch):
    from accelctl.api import load, plan
    from accelctl.plan.checks import check_plan

    monkeypatch.setenv("HABANA_VENV", str(tmp_path / "no-venv"))
    spec = next(s for s in load(ROOT / "workloads" / "bloomz.wl") if s.name == "bloomz_176b")
    (result,) = check_plan(plan(spec, "gaudi2"), spec)
    assert result.ok is None and f"no {tmp_path / 'no-venv'}/bin/python" in result.messages[0]
    assert "unavailable" in result.render()


def test_a_backend_without_a_tool_has_no_checks():
    from accelctl.api import load, plan
    from accelctl.plan.checks import check_plan

    spec = load(ROOT / "workloads" / "ddp_cpu.wl")[0]
    p = plan(spec, "cpu")
    assert p.backend == "torchrun" and check_plan(p, spec)
    one = next(s for s in load(ROOT / "workloads" / "bloomz.wl") if s.name == "bloomz_176b")
    p = plan(one, "cpu")
    assert p.backend == "cpu" and check_plan(p, one) == []


# -- refusals point at the setting in the way -----------------------------------------------

REFUSED = """workload gen {
  task generate { prompt = "hi"  max_new_tokens = 4 tokens }
  model bloom(layers = 2, hidden = 64, heads = 4)
  precision fp16
  target half {
    device = gaudi2
    precision = fp16
  }
  target inherits { device = gaudi2 }
  target two_ways {
    device = gaudi2
    nodes = 2
    precision = fp16
  }
  target forced {
    device = cpu
    devices = 2
    backend = cpu
    precision = fp32
  }
}
"""


def _refusals(target: str):
    from accelctl.api import check, parse, plan
    from accelctl.errors import PlanError, attach_source

    (spec,) = check(parse(REFUSED, "refused.wl"))
    with pytest.raises(PlanError) as info:
        plan(spec, target)
    return attach_source(info.value.diagnostics, REFUSED)


def test_a_precision_refusal_points_at_the_precision_line():
    (d,) = _refusals("half")
    assert d.code == "E520" and d.message == "no backend can run target half"
    assert d.span.line == 7 and d.source_line == "    precision = fp16"
    # both of gaudi's reasons are about this line: one diagnostic, as before, now at the line
    assert d.hint == ("gaudi: backend gaudi does not run fp16; gaudi: Gaudi runs 16-bit as bf16 (seed 000: bf16 on "
                      "Gaudi where A100 uses fp16); set precision = bf16")
    assert d.render().startswith("refused.wl:7:5: error[E520]: no backend can run target half\n 7 |     precision")


def test_a_refusal_of_a_workload_setting_points_at_the_workload_line():
    (d,) = _refusals("inherits")
    assert d.span.line == 4 and d.source_line == "  precision fp16" and "Gaudi runs 16-bit as bf16" in d.hint


def test_each_setting_in_the_way_gets_its_own_diagnostic():
    precision, nodes = _refusals("two_ways")  # in the order the backend gives its reasons
    assert (nodes.span.line, precision.span.line) == (12, 13)
    assert "multi-node Gaudi" in nodes.hint and "Gaudi runs 16-bit as bf16" in precision.hint
    assert {nodes.code, precision.code} == {"E520"}


def test_a_forced_backend_points_at_what_it_cannot_do():
    (d,) = _refusals("forced")
    assert d.span.line == 17 and d.hint == "backend cpu runs one process; use torchrun for devices > 1"


def test_every_backend_asks_for_a_strategy_the_worker_has():
    from accelctl.plan.registry import BACKENDS
    from accelctl.worker.strategy import STRATEGIES

    for name, backend in BACKENDS.items():
        assert backend.worker_strategy in STRATEGIES, name


def test_the_engines_the_language_accepts_are_the_engine_plug_ins():
    """issue 28: `engine = deepspeed` validated (ENGINE_KEYS lists the DeepSpeed launcher's block)
    and plan then refused it (E521); the language's engines are the registry's."""
    from accelctl.plan.registry import ENGINES as PLUG_INS
    from accelctl.language.schema import ENGINES, LAUNCHER_BLOCKS

    assert set(ENGINES) == set(PLUG_INS)
    assert set(LAUNCHER_BLOCKS) & set(PLUG_INS) == set()

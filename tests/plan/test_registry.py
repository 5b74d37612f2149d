"""The registry is a name -> module map: the plug-in table (``accelctl.spec.plugins``) lists
every backend and engine once, the check pass offers exactly those names, and the registry
imports them from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.plan import registry
from accelctl.spec import plugins, schema

ROOT = Path(__file__).resolve().parents[2]


def test_the_schema_offers_the_backends_of_the_plug_in_table_in_selection_order():
    assert schema.BACKENDS == tuple(plugins.BACKENDS) == tuple(registry.BACKENDS)
    assert schema.TARGET_KEYS["backend"].detail == ", ".join(plugins.BACKENDS)


def test_the_registry_holds_the_classes_the_table_names():
    for table, loaded in ((plugins.BACKENDS, registry.BACKENDS), (plugins.ENGINES, registry.ENGINES)):
        for name, path in table.items():
            module, cls = path.split(":")
            obj = loaded[name]
            assert type(obj).__module__ == module and type(obj).__name__ == cls and obj.name == name


def test_a_row_whose_class_calls_itself_otherwise_is_refused():
    with pytest.raises(RuntimeError, match="calls itself 'torchrun'"):
        registry._load_all({"not_torchrun": plugins.BACKENDS["torchrun"]})


def test_the_plug_in_table_imports_nothing():
    import ast
    from pathlib import Path

    tree = ast.parse(Path(plugins.__file__).read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [n.module for n in imports if isinstance(n, ast.ImportFrom)] == ["__future__"]


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

"""Every module accelctl starts by name is in ``accelctl.entrypoints``, resolves, and can be run
with ``python -m``; no other module of accelctl spells such a name (the layer contracts cannot
see a process boundary, so a name written elsewhere would be an import nobody checks)."""

from __future__ import annotations

import ast
from pathlib import Path

from accelctl import entrypoints

ROOT = Path(__file__).resolve().parents[1]
NAMES = {k: v for k, v in vars(entrypoints).items() if k.isupper() and isinstance(v, str)}


def test_every_name_resolves_to_a_module_python_can_run():
    """Resolved as files of this checkout (``find_spec`` of a submodule would import its package:
    the worker's imports torch)."""
    assert {"WORKER", "SUPERVISOR"} <= set(NAMES)
    for key, name in NAMES.items():
        base = ROOT.joinpath(*name.split("."))
        main = base / "__main__.py" if base.is_dir() else base.with_suffix(".py")
        assert main.is_file(), (key, name, main)
        if not base.is_dir():
            assert '__name__ == "__main__"' in main.read_text(encoding="utf-8"), f"{name}: python -m would do nothing"


def _spelled(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants that are a registry name, or an ``accelctl.*`` module after ``-m`` (docstrings
    and comments apart)."""
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docstrings and node.value in NAMES.values():
            found.append((node.lineno, node.value))
        if isinstance(node, (ast.List, ast.Tuple)):
            for a, b in zip(node.elts, node.elts[1:]):
                if (isinstance(a, ast.Constant) and a.value == "-m" and isinstance(b, ast.Constant)
                        and isinstance(b.value, str) and b.value.startswith("accelctl")):
                    found.append((b.lineno, b.value))
    return found


def test_no_module_but_the_registry_spells_a_module_it_starts():
    spelled = {}
    for path in sorted((ROOT / "accelctl").rglob("*.py")):
        if path.name == "entrypoints.py" and path.parent.name == "accelctl":
            continue
        hits = _spelled(ast.parse(path.read_text(encoding="utf-8")))
        if hits:
            spelled[path.relative_to(ROOT).as_posix()] = hits
    assert spelled == {}, spelled


def test_the_scan_finds_a_name_spelled_outside_the_registry():
    """The scan above can fail: a module started by a spelled name is found."""
    tree = ast.parse('"""Runs accelctl.worker."""\ncmd = [sys.executable, "-m", "accelctl.tools.x"]\n'
                     'W = "accelctl.worker"\n')
    assert _spelled(tree) == [(2, "accelctl.tools.x"), (3, "accelctl.worker")]

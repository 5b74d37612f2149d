"""No two files of accelctl import each other, directly or round a loop: every import counts,
the ones inside functions too (a lazy import is still a dependency, only a later one)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "accelctl"


def _module(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of it that it imports."""
    files = [p for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    modules = {_module(p, package) for p in files}
    return {_module(p, package): _imports(p, modules, package) for p in files}


def _imports(path: Path, modules: set[str], root: Path) -> set[str]:
    """The accelctl modules ``path`` imports: ``from P import N`` names module P.N where that is
    a module, else P."""
    me = _module(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return {m for m in out if m in modules and m != me}


def test_the_files_of_accelctl_import_one_way():
    graph = _graph(PACKAGE)
    assert len(graph) > 200 and sum(map(len, graph.values())) > 500  # the walk sees the package
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle between files: {' -> '.join(exc.args[1])}") from None


def test_a_lazy_import_round_a_loop_is_found(tmp_path):
    """The check itself: two modules of a package that import each other, one of them inside a
    function, are a cycle."""
    pkg = tmp_path / "accelctl"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from accelctl.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from . import a\n")
    graph = _graph(pkg)
    assert graph["accelctl.sub.a"] == {"accelctl.sub.b"} and graph["accelctl.sub.b"] == {"accelctl.sub.a"}

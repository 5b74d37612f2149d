"""The architecture, checked: one-way layers (import-linter) and no "which backend / which
device is this?" outside the registry and the plug-ins that own the answer."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.test_import_cycles import _graph

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "accelctl"

#: where naming a backend or a device family/kind in a comparison is the point: the plug-ins
#: themselves and the registry that maps names to them
OWNERS = ("backends/", "engines/", "plan/registry.py", "families/", "worker/devices.py",
          "worker/strategy.py", "worker/plain_strategy.py")


def _names() -> set[str]:
    from accelctl.families import FAMILIES
    from accelctl.plan.registry import BACKENDS
    from accelctl.catalog import DEVICES

    return set(BACKENDS) | set(FAMILIES) | set(DEVICES)


def test_import_layers_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is part of the dev extra"
    proc = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"Contracts: \d+ kept, 0 broken", proc.stdout), proc.stdout[-2000:]


def test_no_backend_or_device_name_tests_outside_their_plug_ins():
    names = "|".join(sorted(map(re.escape, _names()), key=len, reverse=True))
    compare = re.compile(rf"""(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(OWNERS):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if compare.search(code):
                found.append(f"accelctl/{rel}:{n}: {line.strip()}")
    assert not found, "ask the plug-in or the registry instead:\n" + "\n".join(found)


def test_the_check_itself_finds_a_name_test(tmp_path):
    """The grep above is not vacuous: it flags the shape it forbids."""
    names = "|".join(sorted(map(re.escape, _names()), key=len, reverse=True))
    compare = re.compile(rf"""(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    assert compare.search('if job.backend == "deepspeed":')
    assert compare.search("if target.device != 'cpu':")
    assert not compare.search('if job.strategy == STRATEGY:')


def _family_name_tests(source: str, names: set[str], kinds: set[str] = frozenset()) -> list[str]:
    """Where ``source`` asks "which device family is this?" by name: an ``adapter``/``family``
    value compared with a family's name (``==``, ``!=``, ``in`` a tuple of them), a device or
    kind's name told by its start (``startswith`` a prefix of one of ``names`` or ``kinds``), or a
    backend's own ``adapters`` tuple.
    Not torch's device type (``device.type == "cuda"`` is torch's word, the same on ROCm)."""
    import ast

    def strs(node) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(strs(e) for e in node.elts)) if node.elts else set()
        return set()

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            others = [ast.unparse(p) for p in parts if not strs(p)]
            if (set().union(*map(strs, parts)) & names and any("adapter" in o or "famil" in o for o in others)
                    and not any(o.endswith(".type") for o in others)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and node.args):
            prefixes = strs(node.args[0])
            if any(len(p) > 1 and n.startswith(p) for p in prefixes for n in names | set(kinds)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if (isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "adapters" for t in stmt.targets)
                        and strs(stmt.value) & names):
                    found.append(f"{stmt.lineno}: {ast.unparse(stmt)}")
    return found


def test_no_device_family_is_told_by_its_name_outside_its_own_module():
    """A family's facts are its row's (``accelctl.families``): code elsewhere reads a field of
    the row, never the family's name, so a new family (docs/extending.md) changes no other file."""
    from accelctl.families import FAMILIES
    from accelctl.catalog import DEVICES

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith("families/"):
            found += [f"accelctl/{rel}:{hit}" for hit in _family_name_tests(path.read_text(encoding="utf-8"),
                                                                             set(FAMILIES), set(DEVICES))]
    assert not found, "read the family's row instead:\n" + "\n".join(found)


def test_the_family_check_finds_each_shape_it_forbids():
    names = {"cpu", "cuda", "hpu"}
    for shape in ('if adapter_of(target) == "hpu": pass', "if dev.adapter in ('cpu', 'cuda'): pass",
                  "ok = family != 'cuda'", "x = [d for d in DEVICES if not d.startswith('gaudi')]",
                  "class B:\n    adapters = ('cpu', 'cuda')"):
        assert _family_name_tests(shape, names, {"gaudi2"}), shape
    for fine in ('if p.device.type == "cuda": pass', 'if job.strategy == "plain": pass',
                 "if accelerator == 'cpu': pass", "a.startswith('--')", "adapters = tuple(f.name for f in FAMILIES.values())"):
        assert not _family_name_tests(fine, names, {"gaudi2"}), fine


def test_no_verb_module_of_the_cli_imports_another():
    """Each verb group is one module of accelctl/cli/ (named by the verb table); what two share
    lives in a helper module beside them, never in a verb module that the other imports."""
    from accelctl.cli import VERBS

    verb_modules = {adds.split(":")[0] for adds, _ in VERBS.values()} - {"accelctl.cli"}
    assert all(m.startswith("accelctl.cli.") for m in verb_modules), verb_modules
    graph = _graph(PACKAGE)  # every import, function-level ones too
    crossing = {m: sorted(graph[m] & (verb_modules - {m})) for m in verb_modules}
    assert not {m: i for m, i in crossing.items() if i}, crossing

"""The architecture, checked: one-way layers (import-linter) and no "which backend / which
device is this?" outside the registry and the plug-ins that own the answer."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "accelctl"

#: where naming a backend or a device family/kind in a comparison is the point: the plug-ins
#: themselves and the registry that maps names to them
OWNERS = ("backends/", "engines/", "plan/registry.py", "families/", "worker/devices.py",
          "worker/strategy.py", "worker/plain_strategy.py")


def _names() -> set[str]:
    from accelctl.families import FAMILIES
    from accelctl.plan.registry import BACKENDS
    from accelctl.spec.catalog import DEVICES

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

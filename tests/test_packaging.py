"""The wheel ships what accelctl reads at run time: the grammar and data files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_the_grammar_and_data(tmp_path):
    cp = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", str(ROOT), "--no-deps", "--no-build-isolation",
                         "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    (wheel,) = tmp_path.glob("accelctl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    grammar = zipfile.ZipFile(wheel).read("accelctl/_grammar/workload.lark")
    assert grammar == (ROOT / "grammar" / "workload.lark").read_bytes()
    for data in ("accelctl/backends/gaudi/data/optimum_habana_flags.json", "accelctl/report/reference.json",
                 "accelctl/backends/xla_neuron/data/torch_xla-2.9.0.json"):
        assert data in names, data
    assert any(n.endswith("entry_points.txt") for n in names)

"""lark's parser tables are cached in the user's cache folder, and an unusable folder only
costs the cache: the syntax error is still explained.

Each case runs in a fresh interpreter (the parser is built once per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_EXPLAIN = (
    "import json, sys\n"
    "from accelctl.dsl import lalr\n"
    "from accelctl.dsl.parser import parse\n"
    "from accelctl.errors import WorkloadError\n"
    "try:\n"
    "    parse('workload a {\\n  steps = 3\\n', 'bad.wl')\n"
    "except WorkloadError as exc:\n"
    "    d = exc.diagnostics[0]\n"
    "    print(json.dumps({'code': d.code, 'line': d.span.line, 'cache': lalr.cache_file()}))\n"
)


def _explain(cache_home: Path) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _EXPLAIN], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # no traceback or lark log line on the way
    return json.loads(proc.stdout)


def test_the_parser_tables_are_written_once_and_read_back(tmp_path):
    first = _explain(tmp_path)
    assert first["code"] == "E101" and first["line"] == 1  # the '{' never closed
    cache = Path(first["cache"])
    assert cache.parent == tmp_path / "accelctl" and cache.is_file() and cache.stat().st_size > 0
    written = cache.stat().st_mtime_ns
    assert _explain(tmp_path) == first
    assert cache.stat().st_mtime_ns == written  # read, not rebuilt and rewritten


def test_an_unusable_cache_folder_leaves_the_diagnostic_as_it_was(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    result = _explain(blocker)
    assert result == {"code": "E101", "line": 1, "cache": False}


def test_a_corrupt_cache_file_is_rebuilt(tmp_path):
    cache = Path(_explain(tmp_path)["cache"])
    cache.write_bytes(b"not a lark cache\n")
    assert _explain(tmp_path)["code"] == "E101"
    assert cache.read_bytes() != b"not a lark cache\n"

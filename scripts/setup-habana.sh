#!/usr/bin/env bash
# optimum-habana 1.21.2 in its own venv, .venv-habana, for checking gaudi plans against the
# real software (tests/backends/test_gaudi.py; python -m accelctl.backends.gaudi.check).
# Its own venv because optimum-habana pins transformers<4.56 (the main venv has 5.x).  No
# Habana runtime is installed (it is not on PyPI); torch 2.13.0 is the small CPU wheel.
# Installed with uv (scripts/uv.sh; needs .venv, scripts/setup.sh makes it): 125 s beside
# .venv-xla at load ~20 (402 s with pip); 38 s alone at load ~5.  Idempotent: a second run
# only checks the installed version.
#   scripts/setup-habana.sh          (HABANA_VENV=path to put it elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${HABANA_VENV:-.venv-habana}"
want=1.21.2
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(m.version('optimum-habana') != '$want' or not m.version('msgspec'))" 2>/dev/null; then
    echo "$VENV: optimum-habana $want already installed"
    exit 0
fi
start=$(date +%s)
. scripts/uv.sh
uv_ensure
"$PY" -m venv "$VENV"
# every package pinned (scripts/habana-constraints.txt): no resolver backtracking; torch
# 2.13.0+cpu from the local wheel store (pip's find-links, scripts/uv.sh)
uv_install "$VENV/bin/python" -c scripts/habana-constraints.txt torch==2.13.0 "optimum-habana==$want" msgspec
echo "$VENV: optimum-habana $want installed in $(( $(date +%s) - start )) s"

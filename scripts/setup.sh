#!/usr/bin/env bash
# Set up accelctl on a fresh machine: a venv in .venv with the pinned run stack.
# Idempotent: a second run only checks that everything is installed.
#   scripts/setup.sh          core + real CPU runs + TUI + tests
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch is pinned in pyproject.toml (extra "run"): 2.14.1 + torchvision 0.29.1 come from
# this machine kind's local wheel store; an unpinned torch could pull a multi-GB build.
.venv/bin/python -m pip install -q -e ".[run,tui,dev]"
.venv/bin/accelctl --version

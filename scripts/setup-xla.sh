#!/usr/bin/env bash
# torch-xla 2.9.0 in its own venv, .venv-xla, for rehearsing Neuron (xla_neuron) plans on the
# XLA CPU device (PJRT_DEVICE=CPU) through the worker's own xla code path, and for checking
# those plans' torch-xla API names against the installed package
# (tests/backends/test_xla_rehearsal.py; plan --check).
# Its own venv because torch-xla 2.9.0 runs on exactly torch 2.9.0 (the main venv has 2.14.1;
# another torch fails at import with an undefined _XLAC symbol).  PyPI carries torch 2.9.0 only
# as the CUDA 12.8 build, which pulls the nvidia-*-cu12 wheels (~4 GB download, ~7 GB venv;
# libtorch_cuda.so links them, so --no-deps does not import); it runs on a CPU-only machine.
# Measured here: 212 s wall for a fresh build with uv (scripts/uv.sh: parallel downloads; 579 s
# with pip), 7.0 GB (nvidia/ 4.3 GB, torch/ 1.7 GB).  A second run only checks the installed
# versions (0.2 s).
#   scripts/setup-xla.sh          (XLA_VENV=path to put it elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${XLA_VENV:-.venv-xla}"
want=2.9.0
marker=accelctl-xla-ready  # written last: tests and plan --check use the venv only once it is there
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(not (m.version('torch-xla') == m.version('torch').split('+')[0] == '$want') or not m.version('timm') or not m.version('msgspec'))" 2>/dev/null; then
    echo "$VENV: torch-xla $want already installed"
    touch "$VENV/$marker"
    exit 0
fi
start=$(date +%s)
rm -f "$VENV/$marker"
. scripts/uv.sh
uv_ensure
"$PY" -m venv "$VENV"
# every package pinned (scripts/xla-constraints.txt): no resolver backtracking, and torchvision
# held at 0.24.0 (the torch 2.9.0 match) so nothing can lift torch off 2.9.0
uv_install "$VENV/bin/python" -c scripts/xla-constraints.txt \
    "torch==$want" "torch-xla==$want" torchvision timm msgspec
touch "$VENV/$marker"
echo "$VENV: torch-xla $want installed in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1)"

#!/usr/bin/env bash
# Set up accelctl on a fresh machine: a venv in .venv with the pinned run stack.
# Idempotent: a second run only checks what is installed.
#
#   scripts/setup.sh          accelctl + what real CPU runs need (torch, transformers,
#                             timm, diffusers, DeepSpeed) + the TUI + the Kubernetes
#                             client and the Kubeflow training SDK (engine kubernetes)
#   scripts/setup.sh --test   also what the whole test suite needs: pytest, mlflow-skinny
#                             and wandb (report --mlflow/--wandb), Transformer
#                             Engine's pure-Python package and optimum-habana in its own
#                             venv (.venv-habana) to check plans against, transformers 4.43.4
#                             over .venv (.venv-ds-legacy, scripts/setup-ds-legacy.sh), torch-xla in
#                             its own venv (.venv-xla, scripts/setup-xla.sh), tmux for the
#                             TUI's terminal test, Slurm + munge (as root, apt-get) for the
#                             slurm engine's local two-node cluster (scripts/setup-apt.sh);
#                             the side venvs and apt in the background beside .venv's install
# Every install through uv (scripts/uv.sh: pinned in scripts/constraints.txt, given pip's own
# wheel store and indexes).  Fresh clone, empty caches, 2 cores at load 16-21: 142 s, then
# --test 229 s more (pip: 245 s and 647 s); a second call only checks (34 s).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
extras="run,deepspeed,tui,report,kubernetes"
test_mode=0
if [ "${1:-}" = "--test" ]; then
    test_mode=1
    extras="$extras,dev,track"
fi
start=$(date +%s)
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
. scripts/uv.sh
uv_ensure
# pip upgraded before the side set-ups start: each reads pip's settings through `pip config
# list` (scripts/uv.sh), which fails while pip is being replaced -- silently, under set -e
uv_install .venv/bin/python --upgrade pip
jobs_started=()
if [ "$test_mode" = 1 ]; then
    # The side environments share nothing with .venv's install: they are built beside it, in
    # the background.  A failure of any fails the set-up, after all have ended.
    trap 'wait' EXIT
    # optimum-habana 1.21.2 in .venv-habana (it pins transformers<4.56)
    ./scripts/setup-habana.sh & jobs_started+=("$!:setup-habana.sh")
    # torch-xla 2.9.0 on exactly torch 2.9.0 in .venv-xla: Neuron plans rehearsed on the XLA
    # CPU device and checked against the installed torch-xla (~4 GB download, ~7 GB disk)
    ./scripts/setup-xla.sh & jobs_started+=("$!:setup-xla.sh")
    # tmux, zsh, fish, g++, Slurm + munge from apt (scripts/setup-apt.sh)
    ./scripts/setup-apt.sh & jobs_started+=("$!:setup-apt.sh")
fi
# Every package pinned (scripts/constraints.txt): torch 2.14.1 + torchvision 0.29.1 come
# from this machine kind's local wheel store; an unpinned torch could pull a multi-GB build.
uv_install .venv/bin/python -c scripts/constraints.txt -e ".[$extras]"
# --no-deps (each pinned here as in scripts/constraints.txt):
# botocore (the aws extra): validates and submits AWS Batch requests.  It declares
# python-dateutil<3 while the constraints pin 4.0.0 (pandas' choice); the parts accelctl uses
# (service models, ParamValidator, the batch client) run with it (tests/engines/).
nodeps="botocore==1.44.5 jmespath==1.1.0"
if [ "$test_mode" = 1 ]; then
    # mlflow-skinny (the track extra, report --mlflow): it declares importlib_metadata<10 while
    # the constraints pin 10.2.0; its deps come with the extra.
    # Transformer Engine's meta package is pure Python: its source is what te_fp8 plans are
    # checked against.  Its CUDA extension cannot install on a CPU-only machine.
    nodeps="$nodeps mlflow-skinny==3.17.2 transformer-engine==2.20.2"
fi
# shellcheck disable=SC2086
uv_install .venv/bin/python --no-deps $nodeps
if [ "$test_mode" = 1 ]; then
    # transformers 4.43.4 over .venv's torch and DeepSpeed (.venv-ds-legacy, a PYTHONPATH
    # overlay): plan --check of BLOOM kernel-injection targets pinned to it (~60 MB)
    ./scripts/setup-ds-legacy.sh
    failed=""
    for job in "${jobs_started[@]}"; do
        wait "${job%%:*}" || failed="$failed ${job#*:}"
    done
    if [ -n "$failed" ]; then
        echo "setup: failed:$failed" >&2
        exit 1
    fi
fi
# accelctl's own modules, compiled as the installed packages are (scripts/uv.sh: with
# PYTHONDONTWRITEBYTECODE=1 nothing imported is cached otherwise); a module edited later is
# compiled again on import, as Python does for a stale .pyc
.venv/bin/python -m compileall -q accelctl
.venv/bin/accelctl --version
echo "setup: $(( $(date +%s) - start )) s"

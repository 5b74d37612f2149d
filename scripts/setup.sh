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
#                             slurm engine's local two-node cluster
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
.venv/bin/python -m pip install -q --upgrade pip
# Every package pinned (scripts/constraints.txt): torch 2.14.1 + torchvision 0.29.1 come
# from this machine kind's local wheel store; an unpinned torch could pull a multi-GB build.
.venv/bin/python -m pip install -q -c scripts/constraints.txt -e ".[$extras]"
# botocore (the aws extra): validates and submits AWS Batch requests.  --no-deps: it declares
# python-dateutil<3 while the constraints pin 4.0.0 (pandas' choice); the parts accelctl uses
# (service models, ParamValidator, the batch client) run with it (tests/engines/).
.venv/bin/python -m pip install -q --no-deps botocore==1.44.5 jmespath==1.1.0
if [ "$test_mode" = 1 ]; then
    # mlflow-skinny (the track extra, report --mlflow): --no-deps because it declares
    # importlib_metadata<10 while the constraints pin 10.2.0; its deps come with the extra.
    .venv/bin/python -m pip install -q --no-deps mlflow-skinny==3.17.2
    # Transformer Engine's meta package is pure Python: its source is what te_fp8 plans are
    # checked against.  --no-deps: its CUDA extension cannot install on a CPU-only machine.
    .venv/bin/python -m pip install -q --no-deps transformer-engine==2.20.2
    # transformers 4.43.4 over .venv's torch and DeepSpeed (.venv-ds-legacy, a PYTHONPATH
    # overlay): plan --check of BLOOM kernel-injection targets pinned to it (~20 s, ~110 MB)
    ./scripts/setup-ds-legacy.sh
    # torch-xla 2.9.0 on exactly torch 2.9.0 in .venv-xla: Neuron plans rehearsed on the XLA
    # CPU device and checked against the installed torch-xla (~4 GB download, ~7 GB disk).
    # The two side venvs share nothing: installed side by side (a fresh CI clone at load 11-16:
    # 223 s and 258 s one after the other); a failure of either fails the set-up, after both end
    ./scripts/setup-habana.sh &
    habana=$!
    xla=0
    ./scripts/setup-xla.sh || xla=$?
    wait "$habana"
    [ "$xla" = 0 ] || exit "$xla"
    # tmux drives the TUI's end-to-end test in a real terminal; Slurm (munged, slurmctld, two
    # slurmd on this host, started by tests/engines/conftest.py) runs the slurm engine's jobs;
    # zsh and fish run the shell-completion tests (tests/test_completion.py) in those shells
    pkgs=""
    command -v tmux >/dev/null || pkgs="tmux"
    command -v zsh >/dev/null || pkgs="$pkgs zsh"
    command -v fish >/dev/null || pkgs="$pkgs fish"
    # torch.compile's inductor builds its CPU kernels with a C++ compiler (optimize { compile = on })
    command -v g++ >/dev/null || pkgs="$pkgs g++"
    for tool in munged slurmctld slurmd sbatch; do  # the daemons are in sbin, which CI's PATH may lack
        PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$tool" >/dev/null \
            || { pkgs="$pkgs slurmctld slurmd slurm-client munge"; break; }
    done
    if [ -n "$pkgs" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    fi
fi
.venv/bin/accelctl --version
echo "setup: $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# .venv-ds-legacy: transformers 4.43.4 (the last release DeepSpeed injects BLOOM kernels with,
# module_inject/containers/bloom.py) with the tokenizers and Hub client it needs, as a folder laid
# over .venv by PYTHONPATH: .venv's torch and DeepSpeed import it, no second torch.  What
# `accelctl plan --check` runs kernel-injection plans in when a target's stack pins
# transformers = "4.43.4" (accelctl/backends/deepspeed/inject_check.py).  ~15 MB download,
# ~60 MB on disk (no bytecode compiled ahead: uv), ~25 s.  Idempotent: a second run only
# checks the versions.
#   scripts/setup-ds-legacy.sh        (DS_LEGACY=path to put it elsewhere; ACCELCTL_SIDE_ENVS finds it)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${DS_LEGACY:-.venv-ds-legacy}"
pins="transformers==4.43.4 tokenizers==0.19.1 huggingface-hub==0.36.2"
if [ -d "$DIR/transformers-4.43.4.dist-info" ] && [ -d "$DIR/tokenizers-0.19.1.dist-info" ] \
    && [ -d "$DIR/huggingface_hub-0.36.2.dist-info" ]; then
    echo "$DIR: $pins already installed"
    exit 0
fi
start=$(date +%s)
rm -rf "$DIR"
# --no-deps: everything else (torch, DeepSpeed, numpy, safetensors, regex...) is .venv's
. scripts/uv.sh
uv_ensure
# shellcheck disable=SC2086
uv_install .venv/bin/python --no-deps --target "$DIR" $pins
echo "$DIR: $pins installed in $(( $(date +%s) - start )) s ($(du -sm "$DIR" | cut -f1) MB)"

#!/usr/bin/env bash
# The device check (issue 21, docs/device-runs.md), on the GPU machine, from the repo root:
#   scripts/device-check.sh OUT_DIR [bench.device options, e.g. --only vit_fp8]
#   scripts/device-check.sh OUT_DIR --kernels   (kernel by kernel: bench/device/kernels.py)
# Installs the carried wheels (.whl/, made here by scripts/device-wheels.sh) into /tmp/site with
# the image's own torch, transformers and timm left as they are, puts accelctl on PYTHONPATH
# (no install, no dependencies), and runs python -m bench.device OUT_DIR: at most 8 files there.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?usage: scripts/device-check.sh OUT_DIR [--only PART ...]}"
shift
START=$SECONDS
# the whole command, wheels installed and every part, inside 8 minutes (the device tool's call: 480 s)
LIMIT_S="${DEVICE_CHECK_LIMIT_S:-470}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
ls .whl/*.whl >/dev/null 2>&1 || { echo "device check: no .whl/ here: run scripts/device-wheels.sh and carry .whl" >&2; exit 2; }
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { echo "device check: the wheels did not install (see $OUT/pip.log)" >&2; tail -5 "$OUT/pip.log"; exit 2; }
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# float8 training is pure Python over torch._scaled_mm: torchao's C++ extensions are not loaded
export TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1
# the machine reaches no network: the Hub is never asked
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
left=$(( LIMIT_S - (SECONDS - START) ))
# --kernels: matmul by shape (bf16, FP8), FP8 scaling, bandwidth, launch overhead (bench/device/kernels.py)
if [ "${1:-}" = "--kernels" ]; then
  exec timeout -k 10 "$left" "$PY" -m bench.device.kernels "$OUT/kernels.json"
fi
# the parts' budget: what is left less ~50 s for the device facts, the estimates and a clean stop
exec timeout -k 10 "$left" "$PY" -m bench.device "$OUT" --budget-s $(( left - 50 )) "$@"

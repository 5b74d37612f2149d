#!/usr/bin/env bash
# Download the wheels of scripts/device-wheels.txt for the GPU machine (Python 3.12, manylinux
# x86-64) into .whl/ (git-ignored), each checked against its sha256; build deepspeed's wheel from
# its checked sdist; refuse a set of 64 MiB or more (what one device command may carry).
#   scripts/device-wheels.sh          download and build into .whl/
#   scripts/device-wheels.sh --dry    check the list only (python -m bench.device.wheels), no download
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [ "${1:-}" = "--dry" ]; then
  exec "$PY" -m bench.device.wheels --check scripts/device-wheels.txt
fi
LIST=scripts/device-wheels.txt
OUT=.whl
rm -rf "$OUT" && mkdir -p "$OUT"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
# name==version --hash=sha256:... per line, for pip's hash-checking mode
grep -v '^#' "$LIST" | grep -v '^deepspeed==' | awk 'NF {print $1" --hash=sha256:"$2}' > "$tmp/wheels.txt"
grep '^deepspeed==' "$LIST" | awk '{print $1" --hash=sha256:"$2}' > "$tmp/sdist.txt"
"$PY" -m pip download -q --no-deps --require-hashes --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$OUT" -r "$tmp/wheels.txt"
"$PY" -m pip download -q --no-deps --require-hashes --no-binary=:all: -d "$tmp/sdist" -r "$tmp/sdist.txt"
# pure Python (DS_BUILD_OPS unset: no op prebuilt); setup.py imports torch, so no build isolation
DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$OUT" "$tmp"/sdist/deepspeed-*.tar.gz
exec "$PY" -m bench.device.wheels --check "$LIST" --folder "$OUT"

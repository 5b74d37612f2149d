# Sourced by the set-up scripts (scripts/setup*.sh): every install goes through uv, pinned in
# scripts/constraints.txt and installed into .venv by pip.  uv downloads and unpacks wheels in
# parallel where pip does one at a time: beside each other at load ~20, .venv-habana took 125 s
# (402 s with pip) and the ~4 GB of .venv-xla 212 s (579 s).
# uv reads neither pip.conf nor the PIP_* variables: pip's own settings (find-links,
# index-url, extra-index-url, constraint, cert, timeout) are handed to it here, so both take
# every wheel from the same place -- the machine's local wheel store where it has the pinned
# release (torch 2.14.1 and its CUDA libraries), PyPI for the rest.
#   uv_ensure                 install the pinned uv into .venv (needs .venv/bin/python)
#   uv_install PYTHON ARGS... `uv pip install` into PYTHON's environment with pip's settings

uv_pip_setting() {  # the first value pip reported for KEY (PIP_CONFIG, read by uv_ensure)
    printf '%s\n' "$PIP_CONFIG" \
        | sed -n "s/^[^.]*\.$1='\(.*\)'\$/\1/p" | head -n 1  # KEY: a pattern without groups
}

uv_ensure() {
    local want
    if [ ! -x .venv/bin/python ]; then
        echo "$0: no .venv: run scripts/setup.sh first (it installs uv, which this set-up uses)" >&2
        return 1
    fi
    want=$(sed -n 's/^uv==//p' scripts/constraints.txt)
    # `uv --version` prints "uv 0.13.9 (x86_64-unknown-linux-gnu)": the version is its second word.
    # (Compared whole, it never matched, and every set-up script ran pip again -- beside
    # setup.sh's upgrade of that same pip, which broke the side venvs' installs.)
    if [ "$(.venv/bin/uv --version 2>/dev/null | cut -d ' ' -f 2)" != "$want" ]; then
        .venv/bin/python -m pip install -q "uv==$want"
    fi
    # --compile-bytecode, as pip does at install: this machine kind sets
    # PYTHONDONTWRITEBYTECODE=1, so a module Python compiles on import is never cached, and
    # without .pyc every process compiled torch, transformers, lark... from source again (import
    # torch + transformers: 2.3 s of CPU with .pyc, 5.1 s without).  That made CI's tests 1.5x
    # slower after the set-up moved to uv without it (stop 33: 2911 s).
    # unsafe-best-match: like pip, the pinned version from whichever index has it (uv's default
    # stops at the first index that knows the name)
    UV_FLAGS=(--index-strategy unsafe-best-match --compile-bytecode)
    # read once, and said when it fails (a pip being replaced meanwhile): without it every
    # wheel would come from PyPI alone
    if ! PIP_CONFIG=$(.venv/bin/python -m pip config list); then
        echo "$0: \`pip config list\` failed: pip's indexes and wheel store are unknown" >&2
        return 1
    fi
    local value
    # word splitting on purpose: pip splits these lists on whitespace too
    for value in $(uv_pip_setting 'find[-_]links'); do UV_FLAGS+=(--find-links "$value"); done
    value=$(uv_pip_setting 'index[-_]url')
    if [ -n "$value" ]; then UV_FLAGS+=(--index-url "$value"); fi
    for value in $(uv_pip_setting 'extra[-_]index[-_]url'); do UV_FLAGS+=(--extra-index-url "$value"); done
    for value in $(uv_pip_setting constraint); do UV_FLAGS+=(--constraint "$value"); done
    value=$(uv_pip_setting cert)
    if [ -n "$value" ]; then export SSL_CERT_FILE="$value"; fi
    value=$(uv_pip_setting '[a-z_-]*timeout')
    if [ -n "$value" ]; then export UV_HTTP_TIMEOUT="$value"; fi
    export UV_PYTHON_DOWNLOADS=never  # the venvs' own interpreter, never one uv fetches
}

uv_install() {
    local python=$1
    shift
    .venv/bin/uv pip install -q --python "$python" "${UV_FLAGS[@]}" "$@"
}

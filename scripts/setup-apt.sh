#!/usr/bin/env bash
# What the test suite needs from Debian's packages (as root, apt-get; run by setup.sh --test):
# tmux drives the TUI's end-to-end test in a real terminal; Slurm (munged, slurmctld, two
# slurmd on this host, started by tests/engines/conftest.py) runs the slurm engine's jobs;
# zsh and fish run the shell-completion tests (tests/test_completion.py) in those shells;
# torch.compile's inductor builds its CPU kernels with a C++ compiler (optimize { compile = on }).
# Idempotent: installs only what is missing.
#   scripts/setup-apt.sh
set -euo pipefail
pkgs=""
command -v tmux >/dev/null || pkgs="tmux"
command -v zsh >/dev/null || pkgs="$pkgs zsh"
command -v fish >/dev/null || pkgs="$pkgs fish"
command -v g++ >/dev/null || pkgs="$pkgs g++"
for tool in munged slurmctld slurmd sbatch; do  # the daemons are in sbin, which CI's PATH may lack
    PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$tool" >/dev/null \
        || { pkgs="$pkgs slurmctld slurmd slurm-client munge"; break; }
done
if [ -n "$pkgs" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    start=$(date +%s)
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    echo "apt:$pkgs installed in $(( $(date +%s) - start )) s"
fi

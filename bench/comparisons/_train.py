"""Shared by the training-step comparisons: a bench workload against a bare loop script with
the same shape, sized down for ``--quick``."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from bench.accelctl_arm import run_accelctl, sized_workload
from bench.baseline_arm import run_baseline
from bench.harness import BENCH, Setup

QUICK = {"warmup": 1, "steps": 3}
FULL = {"warmup": 3, "steps": 20}
#: a full run of a comparison the suite's 15 minutes have less room for: 12 measured steps
SHORT = {"warmup": 3, "steps": 12}
METRICS = {"step_s": "median measured step (warm-up excluded)", "wall_s": "whole run, start to exit"}


def sized_pair(quick: bool, workdir: Path, wl_name: str, shape: list[str], min_warmup: int = 0,
               full: dict[str, int] | None = None) -> tuple[Path, list[str]]:
    """The workload sized for the session (``QUICK``, ``full`` or ``FULL``) and the baseline's
    arguments of the same shape, warm-up and steps, one thread."""
    size = dict(QUICK if quick else (full or FULL))
    size["warmup"] = max(size["warmup"], min_warmup)  # torch.compile: 2 warm-up steps at least (E225)
    wl = sized_workload(BENCH / "workloads" / wl_name, workdir, size["warmup"], size["steps"])
    return wl, [*shape, "--warmup", str(size["warmup"]), "--steps", str(size["steps"]), "--threads", "1"]


def torchrun(ranks: int) -> list[str]:
    """The launcher of a baseline of ``ranks`` processes on this machine, on a free port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
            "--master-addr", "127.0.0.1", "--master-port", port]


def train_setup(quick: bool, workdir: Path, wl_name: str, script: str, shape: list[str], b_label: str,
                arch: dict, launcher: list[str] | None = None, env_extra: dict[str, str] | None = None,
                pinnable: bool = True, min_warmup: int = 0, full: dict[str, int] | None = None,
                target: str | None = None) -> Setup:
    """``full``: the sizes of a full run when not ``FULL`` (a costly comparison measures fewer steps);
    ``target``: the workload's target accelctl runs (``-t``), when not its first."""
    wl, args = sized_pair(quick, workdir, wl_name, shape, min_warmup, full)
    extra = ("-t", target) if target else ()
    return Setup(a=lambda core: run_accelctl(wl, workdir, core, extra=extra, expect=arch),
                 b=lambda core: run_baseline(script, args, core, launcher=launcher, env_extra=env_extra),
                 a_label=f"accelctl run {wl_name}", b_label=b_label, metrics=METRICS, pinnable=pinnable)

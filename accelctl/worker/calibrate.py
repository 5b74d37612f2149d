"""Measure this machine's matmul ceiling: ``python -m accelctl.worker.calibrate --threads N``.

Run by ``accelctl doctor --calibrate`` (in its own interpreter: it needs torch, the doctor
does not import it).  For each dtype -- fp32 always, bf16 where the CPU has native bf16
(AVX512-BF16 / AMX, ``accelctl.hostinfo``) -- it multiplies two n x n matrices (2048 by
default) for ``--seconds`` after a warm-up of a quarter of that, and keeps the **median**
FLOP/s of the timed matmuls: a steady rate, not the best-of of a short probe.  Prints one
JSON line (``accelctl.contract.calibration.Calibration`` fields); the doctor stores it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time

import torch

from accelctl.hostinfo import cpu_has_native_bf16, cpu_model


def steady_matmul_flops(dtype: torch.dtype, n: int, seconds: float) -> tuple[float, int]:
    """(median FLOP/s, number of timed matmuls) of ``n x n`` matmuls over ``seconds``."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    c = torch.empty(n, n, dtype=dtype)
    warm_until = time.perf_counter() + seconds / 4
    while time.perf_counter() < warm_until:
        torch.matmul(a, b, out=c)
    rates: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(rates) < 3:
        t0 = time.perf_counter()
        torch.matmul(a, b, out=c)
        rates.append(2 * n**3 / (time.perf_counter() - t0))
    return statistics.median(rates), len(rates)


def calibrate(threads: int, n: int = 2048, seconds: float = 2.0) -> dict:
    torch.set_num_threads(threads)
    dtypes = [torch.float32] + ([torch.bfloat16] if cpu_has_native_bf16() else [])
    flops, samples = {}, {}
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        flops[name], samples[name] = steady_matmul_flops(dtype, n, seconds)
    return {"device": cpu_model(), "threads": threads,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "flops": flops, "samples": samples, "torch": torch.__version__,
            "method": f"median of {n}x{n} matmuls over {seconds:g} s after {seconds / 4:g} s warm-up"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m accelctl.worker.calibrate")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args(argv)
    print(json.dumps(calibrate(args.threads, args.n, args.seconds)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

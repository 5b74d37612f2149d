"""``python -m bench.device.kernels OUT.json``: what one GPU achieves kernel by kernel, for the
estimate's terms (docs/estimate.md), never a whole run of a seed's experiment.

- **matmul by shape**: bf16 ``torch.matmul`` and FP8 (E4M3, tensorwise scales)
  ``torch._scaled_mm`` at the GEMM shapes of the device check's models and of a 7-8 B decoder,
  in TFLOP/s and as a fraction of the datasheet's dense peak;
- **FP8 scaling**: the amax and the cast to E4M3 of a bf16 activation, eager and compiled --
  what tensorwise dynamic scaling adds to every FP8 GEMM's input;
- **memory bandwidth**: a large device-to-device copy, against the datasheet;
- **launch overhead**: the host time per small kernel launched back to back (eager PyTorch).

Each figure is the median of ``REPEATS`` timed rounds (CUDA events) after a warm-up.  Without
CUDA it writes ``{"cuda": false}`` and exits 2.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

#: (M, K, N) of ``x[M, K] @ w[K, N]``, and where the shape comes from
SHAPES: tuple[tuple[int, int, int, str], ...] = (
    (16448, 1280, 3840, "ViT-H/14 qkv, micro-batch 64 (64 x 257 tokens)"),
    (16448, 1280, 1280, "ViT-H/14 attention out"),
    (16448, 1280, 5120, "ViT-H/14 fc1"),
    (16448, 5120, 1280, "ViT-H/14 fc2"),
    (4096, 1024, 3072, "BERT-Large qkv, 32 x 128 tokens"),
    (4096, 1024, 4096, "BERT-Large fc1"),
    (4096, 4096, 1024, "BERT-Large fc2"),
    (8192, 4096, 4096, "7-8 B decoder attention (8 x 1024 tokens)"),
    (8192, 4096, 14336, "Llama-3-8B gate/up"),
    (8192, 14336, 4096, "Llama-3-8B down"),
    (8192, 8192, 8192, "square 8192"),
    (2048, 2048, 2048, "square 2048"),
)
REPEATS = 5
ITERS = 20


def _timed(fn, torch, iters: int = ITERS) -> float:
    """Median seconds per call of ``fn`` over ``REPEATS`` rounds of ``iters`` calls (CUDA events)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        rounds.append(start.elapsed_time(end) / 1e3 / iters)
    return statistics.median(rounds)


def matmuls(torch, peaks: dict[str, float]) -> list[dict]:
    rows = []
    fp8 = getattr(torch, "float8_e4m3fn", None)
    for m, k, n, what in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)  # nn.Linear's layout
        flops = 2.0 * m * k * n
        bf16_s = _timed(lambda: torch.matmul(x, w.t()), torch)
        row = {"m": m, "k": k, "n": n, "what": what, "bf16_s": bf16_s, "bf16_tflops": flops / bf16_s / 1e12,
               "bf16_of_peak": flops / bf16_s / peaks["bf16"]}
        if fp8 is not None:
            xf, wf = x.to(fp8), w.to(fp8)
            one = torch.ones((), device="cuda", dtype=torch.float32)
            try:
                fp8_s = _timed(lambda: torch._scaled_mm(xf, wf.t(), one, one, out_dtype=torch.bfloat16), torch)
                row.update(fp8_s=fp8_s, fp8_tflops=flops / fp8_s / 1e12, fp8_of_peak=flops / fp8_s / peaks["fp8"],
                           fp8_over_bf16=bf16_s / fp8_s)
            except RuntimeError as exc:
                row["fp8_error"] = str(exc).splitlines()[0][:200]
            del xf, wf
        rows.append(row)
        del x, w
        torch.cuda.empty_cache()
    return rows


def scaling(torch) -> list[dict]:
    """Tensorwise dynamic scaling of a bf16 activation to E4M3: amax, then scale and cast."""
    fp8 = torch.float8_e4m3fn
    top = torch.finfo(fp8).max

    def cast(x):
        scale = top / x.abs().amax().float().clamp(min=1e-12)
        return (x.float() * scale).clamp(-top, top).to(fp8), scale

    compiled = torch.compile(cast)
    rows = []
    for m, k in ((16448, 1280), (16448, 5120), (8192, 4096)):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        moved = x.numel() * 3  # read bf16 (2 B), write E4M3 (1 B): the least a fused cast moves
        eager_s = _timed(lambda: cast(x), torch)
        compiled_s = _timed(lambda: compiled(x), torch)
        rows.append({"m": m, "k": k, "eager_s": eager_s, "compiled_s": compiled_s,
                     "compiled_bytes_per_s_if_fused": moved / compiled_s})
        del x
    return rows


def bandwidth(torch, peak: float) -> dict:
    n = 2 * 2**30  # 2 GiB of bf16 each way
    src = torch.empty(n // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    s = _timed(lambda: dst.copy_(src), torch, iters=10)
    moved = 2.0 * src.numel() * src.element_size()  # read + write
    return {"bytes_moved": moved, "seconds": s, "bytes_per_s": moved / s, "of_datasheet": moved / s / peak}


def launches(torch) -> dict:
    """Host seconds per small kernel launched back to back (eager), with the GPU idle waiting."""
    x = torch.zeros(1024, device="cuda")
    for _ in range(100):
        x.add_(1.0)
    torch.cuda.synchronize()
    count, rounds = 2000, []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(count):
            x.add_(1.0)
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) / count)
    return {"kernels": count, "seconds_per_launch": statistics.median(rounds)}


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "kernels.json")
    import torch

    record: dict = {"cuda": torch.cuda.is_available(), "torch": torch.__version__}
    if not record["cuda"]:
        out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print("kernels: no CUDA device", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(0)
    from bench.device.parts import target_for
    from accelctl.catalog import DATASHEETS

    sheet = DATASHEETS[target_for(name)]
    peaks = {"bf16": sheet.flops["bf16"].value, "fp8": sheet.flops["fp8"].value}
    record.update(device=name, datasheet=target_for(name), peaks=peaks,
                  memory_bandwidth=sheet.memory_bandwidth.value)
    torch.backends.cuda.matmul.allow_tf32 = True
    for part, fn in (("matmul", lambda: matmuls(torch, peaks)), ("fp8_scaling", lambda: scaling(torch)),
                     ("bandwidth", lambda: bandwidth(torch, sheet.memory_bandwidth.value)),
                     ("launch", lambda: launches(torch))):
        t0 = time.perf_counter()
        try:
            record[part] = fn()
        except Exception as exc:  # noqa: BLE001 - one part's failure is recorded, the others still run
            record[part] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        record.setdefault("seconds", {})[part] = round(time.perf_counter() - t0, 1)
        out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"kernels: {part} done in {record['seconds'][part]} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

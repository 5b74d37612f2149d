"""``optimize { compile = on }`` under FSDP2 (issue 24): each transformer block compiled before
``fully_shard`` (torchtitan's order), run for real on 2 gloo ranks (torchrun, the worker as the
runner starts it): Dynamo compiled graphs on every rank (its own counters, reported as the run's
``compiles``), and the loss curve equals the same FSDP run in eager mode.

Tolerance 1e-5, as the parallel matrix's: inductor may fuse and reorder float32 arithmetic, but
measured here (torch 2.14.1, CPU, inductor with aten's random numbers) the compiled curve was
bitwise the eager one, with 4 graphs compiled per rank (a block's graph per block: each block's
``layer_idx`` is a guard).

Slow: two torchruns of 2 workers, one of them compiling with inductor (a C++ compiler).
"""

from __future__ import annotations


import pytest
from parallel_jobs import job, run_ranks

from accelctl.contract.events import LogMessage, RunFinished, read_events
from accelctl.workload.types import MeasureSpec, OptimizeSpec, ParallelSpec
from accelctl.frozen import replace

pytestmark = pytest.mark.slow


def test_fsdp_blocks_compile_and_train_as_eager(tmp_path):
    base = job("llama", ParallelSpec(strategy="fsdp"), tmp_path / "eager")
    base = replace(base, measure=MeasureSpec(warmup=2, steps=2))  # compile = on: 2 warm-up steps
    compiled = replace(base, run_id="compiled", optimize=OptimizeSpec(compile=True),
                       events_dir=str(tmp_path / "compiled" / "events"))
    eager = run_ranks(base, tmp_path / "eager", 2)
    got = run_ranks(compiled, tmp_path / "compiled", 2)
    assert len(got) == len(eager) == 4 and len(set(got)) > 1
    assert got == pytest.approx(eager, abs=1e-5), (got, eager)
    for rank in range(2):
        events = read_events(tmp_path / "compiled" / "events" / f"rank{rank}.jsonl")
        (finished,) = [e for e in events if isinstance(e, RunFinished)]
        assert finished.results.get("compiles", 0) > 0, finished.results  # Dynamo's unique graphs
        assert any(isinstance(e, LogMessage) and "of each of the 4 blocks before fully_shard" in e.message
                   for e in events)
    for rank in range(2):  # the eager run compiled nothing
        (finished,) = [e for e in read_events(tmp_path / "eager" / "events" / f"rank{rank}.jsonl")
                       if isinstance(e, RunFinished)]
        assert not finished.results.get("compiles"), finished.results

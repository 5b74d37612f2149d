"""Real weights the plan cannot get are an error before launch, never a fallback.

Only the host can be asked (its paths and its Hugging Face cache); another machine's
cache is its own, so a plan for it notes where the weights must come from instead.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.contract.job import WorkerJob
from accelctl.errors import Diagnostic
from accelctl.hostinfo import in_hf_cache
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec


def unreachable_weights(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Diagnostic | None:
    """E531 when ``weights = real`` cannot be had on the host with the Hub offline, or the model
    names no weights at all (an architecture: ``model bert(...)``)."""
    m = job.model
    if m.weights == "real" and m.source == "arch":
        span = spec.origin_of(target.name, "weights", "model.weights") or spec.origin_of(target.name, "model")
        return Diagnostic("E531", f"weights = real, but the model is an architecture ({m.family}(...)) with no "
                                  "weights to load", span, spec.path,
                          'name the weights: model hf("<hub id>") or local("<path>"), or use weights = auto / random')
    if m.weights != "real" or job.rehearsal_of or not DEVICES[target.device].host or job.hub != "offline":
        return None
    if Path(m.ref).expanduser().exists() or (m.source == "hf" and in_hf_cache(m.ref, m.family)):
        return None
    span = spec.origin_of(target.name, "weights", "model.weights") or spec.origin_of(target.name, "model")
    return Diagnostic(
        "E531", f"weights = real, but {m.ref or 'the model'} is not on this machine (no such path, not in the "
                f"Hugging Face cache) and target {target.name} has hub = offline", span, spec.path,
        "download it first (huggingface-cli download <id>), set hub = online on the target, or use "
        "weights = auto / random")


def weights_note(target: TargetSpec, job: WorkerJob) -> str | None:
    """Where a target on another machine gets its real weights from, said in the plan."""
    m = job.model
    if DEVICES[target.device].host:
        return None
    if job.task.kind == "pretrain" and m.weights == "random" and m.ref:
        return (f"pre-training from {m.ref}'s configuration: random initial weights, not the Hub's trained "
                "ones (weights = real on the model would load them: continued pre-training)")
    if m.weights not in ("real", "auto") or not m.ref:
        return None
    if m.source == "local":
        return f"weights from {m.ref}: that path must exist on the target machine"
    return (f"weights {m.ref} from the Hugging Face Hub (or the target machine's HF cache)" if job.hub == "online"
            else f"hub = offline: {m.ref} must be in the target machine's HF cache (HF_HOME)")

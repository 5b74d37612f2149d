"""E532: a sequence longer than the model's positions, refused at its line before launch.

GPT-2 and BERT embed each position (``FAMILIES[...].absolute_positions``): a sequence past
``max_positions`` has no embedding, and the worker would stop on an IndexError.  What the plan
knows it checks here: the training/inference ``seq_len``; for generation the positions a
prompt and its ``max_new_tokens`` take (less one: the last new token is not fed back) -- exactly
with the byte stand-in tokenizer (one token per UTF-8 byte: a stand-in or random-weight
model) or ``prompt_tokens`` of a dataset, else at least one prompt token.  Where only the
model's own tokenizer knows, the worker checks (``accelctl.worker.generate_loop``: a
``sequence_too_long`` failure).
"""

from __future__ import annotations

from accelctl.contract.job import WorkerJob
from accelctl.errors import Diagnostic
from accelctl.models.catalog import FAMILIES
from accelctl.workload.types import TargetSpec, WorkloadSpec

CODE = "E532"


def byte_tokens(job: WorkerJob) -> bool:
    """Whether the worker tokenises with the byte stand-in tokenizer (as ``worker.models.build``
    decides: random weights in the job's architecture, never a Hub tokenizer)."""
    m = job.model
    return bool(job.architecture) and (m.weights in ("random", "stand_in") or bool(job.rehearsal_of) or not m.ref)


def prompt_tokens(job: WorkerJob) -> tuple[int, bool]:
    """(tokens of one prompt, whether exact) as the worker will build it (``data.prompt_ids``)."""
    d, t = job.data, job.task
    if d.kind != "synthetic" and d.prompt_tokens > 0:
        return d.prompt_tokens, True
    if t.prompt:
        return (len(t.prompt.encode("utf-8")), True) if byte_tokens(job) else (1, False)
    return d.prompt_tokens or 8, True


def too_long(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Diagnostic | None:
    family = FAMILIES.get(job.model.family)
    limit = int(job.architecture.get("max_positions") or 0)
    if family is None or not family.absolute_positions or limit <= 0:
        return None
    name = f"{job.model.family}'s {limit} positions ({job.scale.replace('_', '-')} architecture)"
    if job.task.kind != "generate":
        if job.data.seq_len <= limit:
            return None
        span = spec.origin_of(target.name, "dataset") or spec.origin_of(target.name, "model")
        return Diagnostic(CODE, f"seq_len {job.data.seq_len} is longer than {name}", span, spec.path,
                          f"lower seq_len to at most {limit}, or give the model more positions "
                          f"(max_positions = {job.data.seq_len} in its shape)")
    prompt, exact = prompt_tokens(job)
    need = prompt + job.task.max_new_tokens - 1  # the last new token is never fed back
    if need <= limit:
        return None
    span = spec.origin_of(target.name, "task.max_new_tokens", "task.prompt", "task")
    what = f"a prompt of {prompt} token(s)" if exact else "a prompt of at least 1 token"
    return Diagnostic(CODE, f"{what} + max_new_tokens {job.task.max_new_tokens} takes {need} positions (the last new "
                            f"token is not fed back), more than {name}", span, spec.path,
                      _shorter(prompt, job.task.max_new_tokens, limit))


def _shorter(prompt: int, new: int, limit: int) -> str:
    """The hint of a prompt + new tokens past ``limit`` positions: numbers that then fit."""
    more = "or give the model more positions (max_positions in its shape)"
    if prompt <= limit:  # one new token fits: fewer of them do
        return f"lower max_new_tokens to at most {limit - prompt + 1}, shorten the prompt, {more}"
    if new <= limit:
        return f"shorten the prompt to at most {limit - new + 1} tokens (with max_new_tokens {new}), {more}"
    return f"shorten the prompt and lower max_new_tokens to at most {limit} positions together, {more}"

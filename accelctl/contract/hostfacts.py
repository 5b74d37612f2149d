"""The facts of the machine a plan is compiled on, as one explicit input of the plan compiler.

A host (cpu) target's plan, or an accelerator target's CPU rehearsal, depends on the machine's
cores, CPU flags, available memory and stored calibration.  ``HostFacts.here()`` reads them from
this machine (what the CLI plans with); a test passes fixed ones, so the same input gives the
same plan on any machine.  ``compile_plan(..., host=facts)`` makes ``facts`` what ``current()``
returns while it compiles; outside a compile, ``current()`` is this machine's.  The Hugging Face
cache and local weights are files a plan names, not host facts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from accelctl import hostinfo
from accelctl.contract import calibration
from accelctl.frozen import Value


class HostFacts(Value):
    """``cores``: the processor cores this process may use; ``cpu_model``, ``flags``: the CPU's
    name and /proc/cpuinfo flags; ``memory_bytes``: memory available (0: unknown);
    ``calibrations``: the ``doctor --calibrate`` measurements of this CPU (None: the ones stored
    on this machine, read when a plan asks: a cpu target in bf16/fp16)."""

    cores: int
    cpu_model: str
    flags: frozenset[str]
    memory_bytes: int
    calibrations: tuple[calibration.Calibration, ...] | None = ()

    @classmethod
    def here(cls) -> "HostFacts":
        """This machine's facts (read now; /proc/cpuinfo once per process)."""
        return cls(cores=hostinfo.cpu_count(), cpu_model=hostinfo.cpu_model(), flags=hostinfo.cpu_flags(),
                   memory_bytes=hostinfo.memory_available_bytes(), calibrations=None)

    def has_native(self, dtype: str) -> bool:
        """Whether this CPU computes ``dtype`` natively (bf16/fp16 need their instructions)."""
        return hostinfo.cpu_has_native(dtype, " ".join(sorted(self.flags)))

    def speed_vs_fp32(self, dtype: str, threads: int) -> tuple[float, str] | None:
        """``dtype``'s measured matmul speed over fp32's here (``calibration.speed_vs_fp32``)."""
        return calibration.speed_vs_fp32(dtype, self.cpu_model, threads, entries=self.calibrations)  # None: the file

    def precision_warning(self, dtype: str, threads: int) -> str | None:
        """The one warning for a slow 16-bit precision on this CPU (``hostinfo.cpu_precision_warning``):
        the stored measurement decides where there is one, else the flags."""
        measured = self.speed_vs_fp32(dtype, threads) if dtype in ("bf16", "fp16") else None
        return hostinfo.cpu_precision_warning(dtype, native=self.has_native(dtype), measured=measured)


_CURRENT: ContextVar[HostFacts | None] = ContextVar("accelctl_host_facts", default=None)


def current() -> HostFacts:
    """The facts of the plan being compiled (``using``), else this machine's."""
    return _CURRENT.get() or HostFacts.here()


@contextlib.contextmanager
def using(facts: HostFacts) -> Iterator[HostFacts]:
    """``facts`` are ``current()`` inside the block (the plan compiler's explicit input)."""
    token = _CURRENT.set(facts)
    try:
        yield facts
    finally:
        _CURRENT.reset(token)

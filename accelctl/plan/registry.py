"""The registry of backends: the one place that chooses a backend for a target.

Which plug-ins exist, and in which order they are asked, is data
(``accelctl.language.plugins``: name -> "module:Class"); this module imports them from there,
each the first time it is asked for (``PluginTable``): ``accelctl plan`` of a cpu target
imports the cpu backend and the local engine, not the Slurm, Kubernetes and AWS Batch
engines (their subprocess/socket imports) nor the vendor backends that come after the one
that selects the target (cold ``plan`` is measured against ``import lark, rich``: bench/).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

from accelctl.backends.base import Backend, refusal
from accelctl.engines.base import Engine
from accelctl.errors import Diagnostic
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.language import plugins
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec
from accelctl.frozen import replace


def load_plugin(path: str):
    """The object a ``"module:Class"`` path names, instantiated."""
    return plugins.resolve(path)()


def _load_all(table: dict[str, str]) -> dict:
    """Every plug-in of a table, imported now (a misnamed row raises RuntimeError)."""
    return dict(PluginTable(table))


class PluginTable(MutableMapping):
    """A plug-in table (name -> "module:Class") read as name -> plug-in object, each imported
    and instantiated on first access and kept; names and their order are the table's, so
    ``in``, ``len`` and iteration import nothing, and ``.values()`` imports in order, as
    far as it is iterated.  Writable, for tests that add a plug-in (``monkeypatch.setitem``)."""

    def __init__(self, table: dict[str, str]):
        self._paths = dict(table)
        self._loaded: dict[str, object] = {}

    def __getitem__(self, name: str):
        if name not in self._loaded:
            path = self._paths[name]  # KeyError: not a plug-in (``.get`` -> None)
            plugin = load_plugin(path)
            if plugin.name != name:  # raised on every access, never kept
                raise RuntimeError(f"accelctl.language.plugins lists {path} as {name!r}, but it calls itself "
                                   f"{plugin.name!r}")
            self._loaded[name] = plugin
        return self._loaded[name]

    def __setitem__(self, name: str, plugin) -> None:
        self._paths.setdefault(name, "")
        self._loaded[name] = plugin

    def __delitem__(self, name: str) -> None:
        del self._paths[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._paths))

    def __len__(self) -> int:
        return len(self._paths)

    def __contains__(self, name: object) -> bool:
        return name in self._paths


#: backends by name, in selection order: the first that selects a target wins
BACKENDS: MutableMapping[str, Backend] = PluginTable(plugins.BACKENDS)

#: engines by name (``engine = ...`` in a target, ``--engine`` on the command line)
ENGINES: MutableMapping[str, Engine] = PluginTable({name: plugins.engine_row(name).engine for name in plugins.ENGINES})


#: parallel strategies built for some device families only (their rows' ``parallelisms``):
#: elsewhere refused at the parallel line
STRATEGY_NAMES = {"fsdp": "FSDP", "tensor": "tensor parallelism", "pipeline": "pipeline parallelism"}
BUILT_ON = {s: tuple(f.name for f in DEVICE_FAMILIES.values() if s in f.parallelisms) for s in STRATEGY_NAMES}
#: why a strategy is not built on a device family, where the stack itself says no
NOT_ON = {(s, f.name): why for f in DEVICE_FAMILIES.values() for s, why in f.not_built}


def choose(spec: WorkloadSpec, target: TargetSpec) -> tuple[Backend | None, list[Diagnostic]]:
    """The backend for a target, or None with the refusals (E520, each at the setting in the way)."""
    strategy, adapter = target.parallel.strategy, DEVICES[target.device].adapter
    if strategy in BUILT_ON and adapter not in BUILT_ON[strategy]:
        return None, [refusal(spec, target, f"parallel = {strategy}: " + NOT_ON.get((strategy, adapter), (
            f"this version of accelctl builds {STRATEGY_NAMES[strategy]} for {', '.join(BUILT_ON[strategy])} "
            f"devices, not for {target.device} ({adapter}); use zero(stage = 3) to shard a model, or "
            "deepspeed_inference(tp = N) to split one for generation")), "parallel")]
    if target.backend:
        b = BACKENDS.get(target.backend)
        if b is None:
            return None, [refusal(spec, target, f"backend {target.backend} is not available in this version of "
                                  "accelctl", "backend")]
        why = b.unsupported(spec, target)
        return (None, _one_per_line(why)) if why else (b, [])
    # the first backend that selects the target decides: if it cannot run it, the target is
    # refused with its reasons rather than handed to a generic backend that would ignore
    # what the target asked for (fp8, an example script, ZeRO...)
    for b in BACKENDS.values():
        if b.selects(spec, target):
            why = b.unsupported(spec, target)
            return (None, _one_per_line([replace(d, hint=f"{b.name}: {d.hint}") for d in why])) if why else (b, [])
    reasons = [f"{b.name}: {'; '.join(d.hint for d in b.unsupported(spec, target)) or 'not selected'}"
               for b in BACKENDS.values()]
    return None, [refusal(spec, target, "; ".join(reasons))]


def _one_per_line(refusals: list[Diagnostic]) -> list[Diagnostic]:
    """Refusals pointing at the same place merged into one (their reasons joined by "; "), in order."""
    merged: dict[object, Diagnostic] = {}
    for d in refusals:
        first = merged.get(d.span)
        merged[d.span] = d if first is None else replace(first, hint=f"{first.hint}; {d.hint}")
    return list(merged.values())

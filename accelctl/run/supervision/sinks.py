"""Sinks: where a run's events go (console, TUI, a file, a test's list).

A sink is either

* any callable ``sink(event) -> None``, or
* an object with ``on_event(event) -> None`` and, optionally, ``close(result) -> None``
  (called once with the ``RunResult`` after ``summary.json`` is written).

The runner calls sinks from its supervisor thread, one event at a time, in arrival
order.  A sink that raises is reported once on the ``accelctl.run`` logger and then
skipped for the rest of the run: a broken display never stops a measurement.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger("accelctl.run")


@runtime_checkable
class Sink(Protocol):
    def on_event(self, event: Any) -> None: ...


class CallbackSink:
    """Adapts a plain callable to the sink protocol."""

    def __init__(self, fn: Callable[[Any], None]):
        self.fn = fn

    def on_event(self, event: Any) -> None:
        self.fn(event)

    def __repr__(self) -> str:
        return f"CallbackSink({getattr(self.fn, '__qualname__', self.fn)!r})"


def as_sink(obj: Any) -> Any:
    """``obj`` if it has ``on_event``; a ``CallbackSink`` if it is callable."""
    if hasattr(obj, "on_event"):
        return obj
    if callable(obj):
        return CallbackSink(obj)
    raise TypeError(f"not a sink (needs on_event(event) or to be callable): {obj!r}")


class FanOut:
    """Delivers each event to every sink; isolates sinks from each other's errors."""

    def __init__(self, sinks: Iterable[Any] = ()):
        self.sinks = [as_sink(s) for s in sinks]
        self._broken: set[int] = set()

    def _call(self, i: int, sink: Any, method: str, arg: Any) -> None:
        if i in self._broken:
            return
        fn = getattr(sink, method, None)
        if fn is None:
            return
        try:
            fn(arg)
        except (Exception, SystemExit):  # noqa: BLE001 - a sink must not stop the run
            # (SystemExit: rich's answer to a closed pipe, as in ``accelctl run | head``)
            self._broken.add(i)
            log.exception("sink %r failed in %s; it is skipped for the rest of the run", sink, method)

    def on_event(self, event: Any) -> None:
        for i, sink in enumerate(self.sinks):
            self._call(i, sink, "on_event", event)

    def close(self, result: Any) -> None:
        for i, sink in enumerate(self.sinks):
            self._broken.discard(i)  # a sink that failed on an event may still want to finish
            self._call(i, sink, "close", result)

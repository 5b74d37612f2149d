"""The local engine's row: the backend's launch, run on this machine (``accelctl.engines.base``)."""

from __future__ import annotations

from accelctl.language.plugins import EngineRow

ROW = EngineRow(
    name="local",
    engine="accelctl.engines.base:LocalEngine",
    summary="run on this machine",
    runs_here=True,
)

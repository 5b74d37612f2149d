"""``engine torchrun { ... }``: the settings of the torchrun engine (``accelctl.engines.torchrun``)."""

from __future__ import annotations

from accelctl.spec import values as V

SETTINGS: dict[str, V.VType] = {
    "rdzv_backend": V.choice("c10d", "static"),
    "rdzv_endpoint": V.endpoint(),
    "rdzv_id": V.token(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", "job7", "rendezvous id", bare=True),
    "join_timeout": V.quantity("time"),
    "max_restarts": V.integer(0, 100),
    "master_port": V.integer(1, 65535),
}

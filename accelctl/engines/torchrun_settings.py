"""``engine torchrun { ... }``: the settings of the torchrun engine (``accelctl.engines.torchrun``)."""

from __future__ import annotations

from accelctl.language import values as V
from accelctl.language.plugins import EngineRow

SETTINGS: dict[str, V.VType] = {
    "rdzv_backend": V.choice("c10d", "static"),
    "rdzv_endpoint": V.endpoint(),
    "rdzv_id": V.token(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", "job7", "rendezvous id", bare=True),
    "join_timeout": V.quantity("time"),
    "max_restarts": V.integer(0, 100),
    "master_port": V.integer(1, 65535),
}

ROW = EngineRow(
    name="torchrun",
    engine="accelctl.engines.torchrun:TorchrunEngine",
    summary="one torchrun agent per node, c10d rendezvous (run launch nodeI on node I)",
    settings=SETTINGS,
    meanings={
        "rdzv_backend": "torchrun rendezvous backend", "rdzv_endpoint": "host:port of the rendezvous",
        "rdzv_id": "rendezvous id", "join_timeout": "how long ranks wait to join",
        "max_restarts": "restarts of failed ranks", "master_port": "port of rank 0",
    },
    code="E548",
    refuses="`engine torchrun` cannot place the target: `rdzv_endpoint` is not `HOST:PORT` (port 1–65535), "
            "`rdzv_id` is not a safe token (1–64 letters, digits, `.`, `_`, `-`), `join_timeout` under 1 s, "
            "`master_port` with the c10d rendezvous (it is for `rdzv_backend = static`)",
    runs_here=True,
)

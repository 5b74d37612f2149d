"""``engine kubernetes { ... }``: the settings of the kubernetes engine (``accelctl.engines.kubernetes``)."""

from __future__ import annotations

from accelctl.engines.settings import IMAGE
from accelctl.spec import values as V

_NAME = V.token(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", '"default"', "Kubernetes name")

SETTINGS: dict[str, V.VType] = {
    "namespace": V.token(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", '"default"', "Kubernetes namespace"),
    "image": IMAGE,
    "service_account": _NAME,
    "priority_class": _NAME,
    "node_selector": V.string_list(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,316}=[A-Za-z0-9._-]{0,63}",
                                   '"node.kubernetes.io/instance-type=p5.48xlarge"'),
    "restart_policy": V.choice("never", "on_failure", "always", "exit_code"),
    "backoff_limit": V.integer(0, 1000),
    "clean_pod_policy": V.choice("none", "running", "all"),
    "active_deadline": V.quantity("time"),
    # the shared volume holding the run folder: a PVC, mounted at volume_path in the
    # pods and at the same path on the machine running accelctl
    "volume_claim": _NAME,
    "volume_path": V.string(lines=False),
    "shm_size": V.quantity("bytes"),
    "cpu": V.integer(1, 4096),
    "memory": V.quantity("bytes"),
    "efa": V.boolean(),
}

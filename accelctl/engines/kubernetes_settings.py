"""``engine kubernetes { ... }``: the settings of the kubernetes engine (``accelctl.engines.kubernetes``)."""

from __future__ import annotations

from accelctl.engines.settings import IMAGE
from accelctl.language import values as V
from accelctl.language.plugins import EngineRow

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

ROW = EngineRow(
    name="kubernetes",
    engine="accelctl.engines.kubernetes:KubernetesEngine",
    summary="Kubeflow Training Operator v1 PyTorchJob (master + workers), run folder on a shared volume",
    settings=SETTINGS,
    meanings={
        "namespace": "Kubernetes namespace", "image": "container image", "service_account": "service account",
        "priority_class": "priority class", "node_selector": "pod nodeSelector, \"LABEL=VALUE\" each",
        "restart_policy": "replicas' restartPolicy (default never)",
        "backoff_limit": "runPolicy.backoffLimit: retries before the job fails",
        "clean_pod_policy": "runPolicy.cleanPodPolicy (default running)",
        "active_deadline": "runPolicy.activeDeadlineSeconds",
        "volume_claim": "PVC holding the run folder (required)",
        "volume_path": "where the PVC is mounted, in the pods and here (required)",
        "shm_size": "size limit of /dev/shm (memory)", "cpu": "CPU request per pod",
        "memory": "memory request / limit", "efa": "attach EFA network interfaces",
    },
    code="E549",
    refuses="`engine kubernetes` cannot place the target: no `image`, no shared volume (`volume_claim` + "
            "`volume_path`: the only way the events come back), a `namespace`/`service_account`/`priority_class`/"
            "`volume_claim` that is not a Kubernetes name, a `volume_path` that is not an absolute folder, a "
            "`node_selector` entry that is not `LABEL=VALUE`, `efa = on` on an instance without EFA, a device family "
            "Kubernetes has no resource for, or a backend build that is not one torchrun/DeepSpeed launch "
            "(`neuron_parallel_compile`)",
    scheduler="accelctl.engines.kubernetes_scheduler:KubernetesScheduler",
    image_key="image",
)

"""The kubernetes engine's checks: the PyTorchJob against the training operator's own SDK,
the API server's dry run, and whether a cluster is configured at all.

``sdk_check`` (offline): the SDK deserialises the manifest into ``KubeflowOrgV1PyTorchJob`` and
serialising it back must give the manifest again, so a missing, misplaced, misspelt or mistyped
field is reported with its path.  ``server_dry_run``: a ``dry_run="All"`` create where a
kubeconfig exists, judged by the cluster's CRD schema, admission and quota.  No kubeconfig,
client, reachable server or permission: NOT RUN, never a pass.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from accelctl.backends.findings import CheckResult, not_run
from accelctl.errors import first_line

SDK_TOOL = "kubeflow-training SDK (KubeflowOrgV1PyTorchJob)"
DRY_RUN_TOOL = "Kubernetes API server dry run (dry_run=All)"
INSTALL = "pip install kubeflow-training==1.9.4 kubernetes==35.0.0 (scripts/setup.sh installs both)"
CONNECT_TIMEOUT_S = 10


def sdk_check(job: dict) -> CheckResult:
    try:
        from kubeflow.training import ApiClient
        from importlib.metadata import version
    except ImportError as exc:
        return not_run(SDK_TOOL, f"{exc}; {INSTALL}")
    tool = f"kubeflow-training {version('kubeflow-training')} SDK (KubeflowOrgV1PyTorchJob)"
    problems = sdk_problems(job)
    return CheckResult(tool, not problems, problems or ["valid"])


def sdk_problems(job: dict) -> list[str]:
    """What the SDK model rejects in ``job``, or drops/changes on the way through it ([] = valid)."""
    from kubeflow.training import ApiClient

    class _Response:  # what ApiClient.deserialize reads: .data, the JSON text
        data = json.dumps(job)

    client = ApiClient()
    try:
        model = client.deserialize(_Response(), "KubeflowOrgV1PyTorchJob")
    except (ValueError, TypeError) as exc:
        return [str(exc)]
    return differences(job, client.sanitize_for_serialization(model))


def differences(sent, back, path: str = "") -> list[str]:
    """Where ``back`` (the model serialised again) differs from ``sent``."""
    if isinstance(sent, dict) and isinstance(back, dict):
        out = []
        for key in sent:
            where = f"{path}.{key}" if path else key
            if key not in back:
                out.append(f"{where}: not a field of the model (dropped)")
            else:
                out += differences(sent[key], back[key], where)
        return out
    if isinstance(sent, list) and isinstance(back, list) and len(sent) == len(back):
        return [d for i, (a, b) in enumerate(zip(sent, back)) for d in differences(a, b, f"{path}[{i}]")]
    if sent != back or type(sent) is not type(back):
        return [f"{path}: {sent!r} is read as {back!r}"]
    return []


def kubeconfig_paths() -> list[Path]:
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [Path("~/.kube/config").expanduser()]


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and Path(
        "/var/run/secrets/kubernetes.io/serviceaccount/token").exists()


def load_config() -> str | None:
    """Load the client's configuration (kubeconfig, else in-cluster); the reason when there is none."""
    try:
        from kubernetes import config
    except ImportError as exc:
        return f"the kubernetes client is not installed ({exc}); {INSTALL}"
    present = [str(p) for p in kubeconfig_paths() if p.is_file()]
    if present:
        try:  # the paths given: the client reads $KUBECONFIG once, when it is first imported
            config.load_kube_config(config_file=os.pathsep.join(present))
            return None
        except Exception as exc:  # the client raises ConfigException, ValueError, yaml errors...
            return f"the kubeconfig ({os.pathsep.join(map(str, kubeconfig_paths()))}) cannot be used: {exc}"
    if in_cluster():
        try:
            config.load_incluster_config()
            return None
        except Exception as exc:
            return f"in-cluster configuration failed: {exc}"
    return (f"no Kubernetes cluster configured: no kubeconfig at {os.pathsep.join(map(str, kubeconfig_paths()))} "
            "and not inside a cluster")


def cluster_missing() -> str | None:
    """One line saying why no job can be submitted from here, or None when the API server answers."""
    why = load_config()
    if why:
        return why
    from kubernetes import client

    try:
        client.VersionApi().get_code(_request_timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:  # urllib3 MaxRetryError, ApiException, OSError
        return f"the Kubernetes API server ({client.Configuration.get_default_copy().host}) does not answer: " \
               f"{first_line(exc, 200)}"
    return None


def server_dry_run(job: dict, group: str, version: str, plural: str) -> CheckResult:
    """``job`` created with ``dry_run="All"`` as the custom resource ``group/version`` ``plural``."""
    why = load_config()
    if why:
        return not_run(DRY_RUN_TOOL, why)
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    namespace = job["metadata"].get("namespace", "default")
    try:
        client.CustomObjectsApi().create_namespaced_custom_object(
            group, version, namespace, plural, job, dry_run="All", _request_timeout=CONNECT_TIMEOUT_S)
    except ApiException as exc:
        said = _api_message(exc)
        if exc.status in (401, 403) or (exc.status or 0) >= 500:
            return not_run(DRY_RUN_TOOL, f"the API server did not judge the job (HTTP {exc.status}): {said}")
        return CheckResult(DRY_RUN_TOOL, False, [f"HTTP {exc.status}: {said}"])
    except Exception as exc:  # unreachable server
        return not_run(DRY_RUN_TOOL, f"the API server does not answer: {first_line(exc, 200)}")
    return CheckResult(DRY_RUN_TOOL, True, [f"namespace {namespace}: accepted (nothing created)"])


def _api_message(exc) -> str:
    try:
        return json.loads(exc.body).get("message") or exc.reason
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)

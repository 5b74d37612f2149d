"""Kubernetes as a scheduler: a Kubeflow ``PyTorchJob`` created, described, deleted with the
kubernetes client (kubeconfig, else in-cluster), the master pod's log streamed.

``submit`` checks that the run folder lies on the job's shared volume, fills ``ACCELCTL_RUN_DIR``,
names the job for the run and creates it (handle ``kubernetes://<namespace>/<name>``).
``describe`` reads the job's latest True condition (``Deleting`` while a foreground deletion runs,
or once the job is gone but a pod of it is left); ``cancel`` deletes it with foreground
propagation (a job already gone is no error).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from accelctl.engines.scheduler import AppHandle, AppState, Described, Scheduler
from accelctl.errors import first_line

#: the training operator's job conditions (kubeflow-training's ``JOB_CONDITIONS``, and
#: ``Suspended`` since operator 1.7) and the words of our own -> the one state
STATES: Mapping[str, AppState] = {
    "Submitted": AppState.SUBMITTED, "Created": AppState.PENDING, "Running": AppState.RUNNING,
    "Restarting": AppState.PENDING, "Suspended": AppState.PENDING, "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED, "Deleting": AppState.RUNNING, "Deleted": AppState.CANCELLED,
}
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
#: written into the run folder: namespace/name of the job this run created
JOB_FILE = "kubernetes_job"


def prepare(job: dict, run_dir: Path) -> dict:
    """The manifest for this run: its own name, ``ACCELCTL_RUN_DIR`` filled in (``$`` written
    ``$$``: the kubelet expands ``$(VAR)`` in env values).  Raises ``ValueError`` when the run
    folder is not on the job's shared volume."""
    from accelctl.engines.kubernetes import RUN_DIR_ENV, RUN_VOLUME, escape

    job = json.loads(json.dumps(job))
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        for container in replica["template"]["spec"]["containers"]:
            mount = next((m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] == RUN_VOLUME), None)
            if mount is None or Path(mount) not in (run_dir, *run_dir.parents):
                raise ValueError(f"the run folder {run_dir} is not on the shared volume (mounted at {mount} in the "
                                 f"pods): mount the PVC at {mount} here too and run with --runs-dir under it")
            for env in container.get("env", []):
                if env["name"] == RUN_DIR_ENV:
                    env["value"] = escape(str(run_dir))
    suffix = hashlib.sha256(str(run_dir).encode()).hexdigest()[:8]
    job["metadata"]["name"] = f"{job['metadata']['name']}-{suffix}"
    return job


def state_of(obj: dict) -> str:
    """The job's latest condition whose status is True ("" before the operator saw it)."""
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return conditions[-1]["type"] if conditions else ""


def _clients():
    from accelctl.engines.kubernetes_check import load_config

    why = load_config()
    if why:
        raise RuntimeError(why)
    from kubernetes import client

    return client.CustomObjectsApi(), client.CoreV1Api()


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status", None)


class KubernetesScheduler(Scheduler):
    name = "kubernetes"
    STATES = STATES
    cancel_timeout_s = 300.0
    gone = Described(AppState.CANCELLED, "Deleted")

    def submit(self, request: dict, run_dir: Path, env: Mapping[str, str]) -> AppHandle:
        from accelctl.engines.kubernetes import GROUP, PLURAL, VERSION

        job = prepare(request["manifest"], run_dir)
        api, _ = _clients()
        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        try:
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job)
        except Exception as exc:  # ApiException, an unreachable server
            raise RuntimeError(f"creating pytorchjob {name} failed: {first_line(exc, 300)}") from None
        (run_dir / JOB_FILE).write_text(f"{namespace}/{name}\n", encoding="utf-8")
        return AppHandle(self.name, namespace, name)

    def describe(self, handle: AppHandle) -> Described | None:
        from accelctl.engines.kubernetes import GROUP, PLURAL, VERSION

        api, core = _clients()
        try:
            obj = api.get_namespaced_custom_object(GROUP, VERSION, handle.where, PLURAL, handle.job_id)
        except Exception as exc:
            if _status(exc) != 404:
                raise
            pods = core.list_namespaced_pod(handle.where, label_selector=f"{JOB_NAME_LABEL}={handle.job_id}").items
            return Described(AppState.RUNNING, "Deleting", message=f"{len(pods)} pod(s) left") if pods else None
        if (obj.get("metadata") or {}).get("deletionTimestamp"):  # foreground deletion: pods still going
            return Described(AppState.RUNNING, "Deleting")
        raw = state_of(obj) or "Submitted"
        state = self.state_of(raw)
        return Described(state, raw, self._exit_code(core, handle) if state.terminal else None)

    def _exit_code(self, core, handle: AppHandle) -> int | None:
        try:
            pod = core.read_namespaced_pod(f"{handle.job_id}-master-0", handle.where)
        except Exception:  # noqa: BLE001 - cleaned up already (cleanPodPolicy): no code to give
            return None
        for status in pod.status.container_statuses or []:
            term = status.state.terminated if status.state else None
            if term is not None:
                return int(term.exit_code)
        return None

    def cancel(self, handle: AppHandle) -> None:
        from accelctl.engines.kubernetes import GROUP, PLURAL, VERSION

        api, _ = _clients()
        try:
            api.delete_namespaced_custom_object(GROUP, VERSION, handle.where, PLURAL, handle.job_id,
                                                propagation_policy="Foreground")
        except Exception as exc:
            if _status(exc) != 404:  # deleted already: nothing to do
                raise

    def log_iter(self, handle: AppHandle, run_dir: Path, done: Callable[[], bool]) -> Iterator[str]:
        """The master pod's log, followed until its container ends."""
        _, core = _clients()
        resp = core.read_namespaced_pod_log(f"{handle.job_id}-master-0", handle.where, follow=True,
                                            _preload_content=False)
        rest = b""
        for chunk in resp.stream(4096):
            *lines, rest = (rest + chunk).split(b"\n")
            yield from (line.decode("utf-8", "replace") for line in lines)
        if rest:
            yield rest.decode("utf-8", "replace")

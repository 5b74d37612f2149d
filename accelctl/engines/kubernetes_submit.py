"""``python -m accelctl.engines.kubernetes_submit PYTORCHJOB.json``: the launch of a ``kubernetes`` plan.

1. The manifest's folder is the run folder.  It must lie on the shared volume: under the
   ``volumeMount`` of the job's ``accelctl-run`` volume, which this machine must have mounted
   at the same path as the pods (the ranks append their ``rank<N>.jsonl`` there, and the
   runner that started this process tails them).  Otherwise: one line, exit 2.
2. ``ACCELCTL_RUN_DIR`` is set to the run folder in every replica, and the job gets a name
   of its own for this run (the plan's name + ``-`` + 8 hex digits of the run folder's path).
3. The kubernetes client (kubeconfig, else in-cluster) creates it with
   ``CustomObjectsApi.create_namespaced_custom_object``; no cluster: one line, exit 1.
4. It follows the job's ``status.conditions`` (Created, Running, Restarting, Succeeded,
   Failed) every ``POLL_S``, printing each transition, streams the master pod's log once it
   runs, and exits with the master container's exit code (0 on Succeeded; 1 for a job that
   failed without one, or that disappeared).
5. SIGINT/SIGTERM delete the job with foreground propagation and wait until its pods are
   gone (label ``training.kubeflow.org/job-name``), then exit 128 + the signal.

The job (``namespace/name``, ``ref`` its ``metadata.uid`` from the API server's answer to the
create) goes to the run folder's ``scheduler.json`` (``accelctl.contract.scheduler``,
scheduler ``kubernetes``): ``Submitted`` once created, then every condition change, the
final condition with the master container's exit code, or ``Deleted`` after a stop or when
someone else deleted the job.  The run store copies it into ``summary.json``;
``accelctl runs`` shows it.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import threading
import time
from pathlib import Path

from accelctl.contract import scheduler

NAME = "kubernetes"
POLL_S = 1.0
DELETE_TIMEOUT_S = 300.0
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
#: written into the run folder: namespace/name of the job this run created
JOB_FILE = "kubernetes_job"
_stop = {"signal": 0}


def _on_signal(signum, frame):
    _stop["signal"] = signum


def prepare(job: dict, run_dir: Path) -> dict:
    """The manifest for this run: its own name, ``ACCELCTL_RUN_DIR`` filled in.  Raises
    ``ValueError`` when the run folder is not on the job's shared volume."""
    from accelctl.engines.kubernetes import RUN_DIR_ENV, RUN_VOLUME

    job = json.loads(json.dumps(job))
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        for container in replica["template"]["spec"]["containers"]:
            mount = next((m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] == RUN_VOLUME), None)
            if mount is None or Path(mount) not in (run_dir, *run_dir.parents):
                raise ValueError(f"the run folder {run_dir} is not on the shared volume (mounted at {mount} in the "
                                 f"pods): mount the PVC at {mount} here too and run with --runs-dir under it")
            for env in container.get("env", []):
                if env["name"] == RUN_DIR_ENV:
                    env["value"] = str(run_dir)
    suffix = hashlib.sha256(str(run_dir).encode()).hexdigest()[:8]
    job["metadata"]["name"] = f"{job['metadata']['name']}-{suffix}"
    return job


def record(folder: Path, job: str, state: str, code: int | None = None, uid: str = "") -> None:
    scheduler.write(folder, scheduler.SchedulerJob(NAME, job, state, code, uid))


def state_of(obj: dict) -> str:
    """The job's latest condition whose status is True ("" before the operator saw it)."""
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return conditions[-1]["type"] if conditions else ""


def master_exit_code(core, namespace: str, name: str) -> int | None:
    try:
        pod = core.read_namespaced_pod(f"{name}-master-0", namespace)
    except Exception:
        return None
    for status in pod.status.container_statuses or []:
        term = status.state.terminated if status.state else None
        if term is not None:
            return int(term.exit_code)
    return None


def stream_log(core, namespace: str, pod: str) -> None:
    """Copy the pod's log to stdout until the container ends (a thread)."""
    try:
        resp = core.read_namespaced_pod_log(pod, namespace, follow=True, _preload_content=False)
        for chunk in resp.stream(4096):
            sys.stdout.write(chunk.decode("utf-8", "replace"))
            sys.stdout.flush()
    except Exception as exc:
        print(f"accelctl: log of {pod} ended: {str(exc).splitlines()[0][:200]}", flush=True)


def delete(api, core, namespace: str, name: str, timeout_s: float = DELETE_TIMEOUT_S) -> None:
    """Delete the job (foreground: its pods first) and wait until no pod of it is left."""
    from accelctl.engines.kubernetes import GROUP, PLURAL, VERSION

    try:
        api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                            propagation_policy="Foreground")
    except Exception as exc:
        print(f"accelctl: delete {name}: {str(exc).splitlines()[0][:200]}", flush=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={name}").items
        if not pods:
            print(f"accelctl: pytorchjob {name} deleted, no pod left", flush=True)
            return
        time.sleep(POLL_S)
    print(f"accelctl: pods of {name} still there {timeout_s:.0f} s after the delete", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m accelctl.engines.kubernetes_submit PYTORCHJOB.json", file=sys.stderr)
        return 2
    from accelctl.engines.kubernetes import GROUP, PLURAL, VERSION
    from accelctl.engines.kubernetes_check import load_config

    path = Path(args[0]).resolve()
    try:
        job = prepare(json.loads(path.read_text(encoding="utf-8")), path.parent)
    except (OSError, ValueError, KeyError) as exc:
        print(f"accelctl: {exc}", file=sys.stderr)
        return 2
    why = load_config()
    if why:
        print(f"accelctl: {why}", file=sys.stderr)
        return 1
    from kubernetes import client

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    api, core = client.CustomObjectsApi(), client.CoreV1Api()
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    t0 = time.time()
    try:
        created = api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job)
    except Exception as exc:  # ApiException, unreachable server
        print(f"accelctl: creating pytorchjob {name} failed: {str(exc).splitlines()[0][:300]}", file=sys.stderr)
        return 1
    uid = str(((created or {}).get("metadata") or {}).get("uid") or "") if isinstance(created, dict) else ""
    ref, folder = f"{namespace}/{name}", path.parent
    print(f"accelctl: created pytorchjob {ref} uid {uid or '?'} ({time.time() - t0:.2f} s)", flush=True)
    (folder / JOB_FILE).write_text(f"{ref}\n", encoding="utf-8")
    record(folder, ref, "Submitted", None, uid)
    last, logger = "", None
    while True:
        if _stop["signal"]:
            print(f"accelctl: signal {_stop['signal']}: deleting pytorchjob {name}", flush=True)
            delete(api, core, namespace, name)
            record(folder, ref, "Deleted", None, uid)  # its pods are gone, and their exit codes with them
            return 128 + _stop["signal"]
        try:
            state = state_of(api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                print(f"accelctl: pytorchjob {name} is gone (deleted by someone else?)", flush=True)
                record(folder, ref, "Deleted", None, uid)
                return 1
            print(f"accelctl: reading pytorchjob {name}: {str(exc).splitlines()[0][:200]}", flush=True)
            state = last
        if state != last:
            print(f"accelctl: pytorchjob {name} {state or 'pending'} ({time.time() - t0:.2f} s)", flush=True)
            if state and state not in ("Succeeded", "Failed"):
                record(folder, ref, state, None, uid)
            last = state
        if logger is None and state in ("Running", "Succeeded", "Failed"):
            logger = threading.Thread(target=stream_log, args=(core, namespace, f"{name}-master-0"), daemon=True)
            logger.start()
        if state in ("Succeeded", "Failed"):
            if logger is not None:
                logger.join(timeout=10)
            code = master_exit_code(core, namespace, name)
            record(folder, ref, state, code, uid)
            return 0 if state == "Succeeded" else (code or 1)
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main())

"""A loopback stand-in for the parts of Kubernetes a ``kubernetes`` plan touches, for tests.

Not Kubernetes: no scheduler, no containers, no device plugins, no CRD schema.  It speaks
the REST paths the ``kubernetes`` client uses for a PyTorchJob (``/version``, create / get /
delete ``pytorchjobs`` (a created job gets a ``metadata.uid``), get / list pods, a pod's log with ``follow``) over HTTP on
127.0.0.1, and does what the training operator and the kubelet would do with the job, as
their source says (training-operator ``pkg/controller.v1/pytorch/envvar.go``; the kubelet's
``$(VAR)`` expansion): one *process* per replica (``<job>-master-0``, ``<job>-worker-<i>``)
running the container's ``command`` + ``args`` with its ``env`` expanded in order, plus the
operator's ``MASTER_ADDR`` (127.0.0.1 here, the master's service in a cluster),
``MASTER_PORT``, ``WORLD_SIZE``, ``RANK`` (master 0, worker i -> i + 1),
``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` and ``PET_NNODES``.  ``python`` is this
interpreter.  Conditions: Created, then Running while a pod runs, Succeeded when every pod
exited 0, Failed when one exited non-zero (the others are stopped: ``cleanPodPolicy``).
A foreground delete stops every pod's process group and the pods disappear once they are
gone.

What the API server documents for the objects, checked with the ``kubernetes`` client's own
models, not with accelctl's code:

* ``kubectl create -f`` works against it: the discovery documents (``/api``, ``/apis``, each
  group version's resource list) and the OpenAPI v3 root and ``kubeflow.org/v1`` document whose
  PATCH operation (``x-kubernetes-group-version-kind``) lists the ``fieldValidation`` query
  parameter, which is how client-go's ``QueryParamVerifierV3`` decides to leave validation to
  the server and send ``fieldValidation=Strict`` (kubectl's default ``--validate=strict``);
* every replica's pod template is decoded by the client's deserializer into
  ``V1PodTemplateSpec`` (its constructors refuse a missing required field: 422 ``Invalid``) and
  serialised back: a field the model does not have is an unknown field, pruned from the stored
  job with a ``Warning`` header (``fieldValidation`` ``Warn``, the server's default) or refused
  whole with 400 ``BadRequest`` (``Strict``); a value the model reads as another type is 422.
  A dry run (``dryRun=All``) is judged the same way and stores nothing;
* the operator creates the pods, and the API server validates each as a Pod (the rules of the
  API reference for ``PodSpec``, ``Container``, ``Volume``, ``VolumeMount``, ``EnvVar``,
  ``ContainerPort``): a pod that fails is not created, the job keeps ``Created`` and
  ``Job.events`` holds the operator's ``FailedCreatePod`` message, as a cluster shows it;
* a pod whose ``persistentVolumeClaim`` is not one of ``claims`` stays ``Pending``
  (``persistentvolumeclaim "X" not found``), as the scheduler leaves it.  A claim is a local
  folder, mounted by the loopback only at that same path (it cannot remap paths: a pod that
  mounts it elsewhere stays ``Pending`` saying so); ``Pod.local(path)`` is the local file a
  container path is on a volume, None where no volume is mounted (the image's own files,
  which the loopback does not have).  ``run_containers=False``: the pods are created and
  validated, their commands and environment expanded, and none is started.

What it proves: the rendered pods' commands start and train together with the operator's
variables, the run folder carries the events back, and the submitter follows, streams and
deletes.  What it cannot: anything the real API server, operator or kubelet decide.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

JOBS = "/apis/kubeflow.org/v1/namespaces/"
PODS = "/api/v1/namespaces/"


#: the kubelet's ``$(VAR)`` syntax, as k8s.io/kubernetes third_party/forked/golang/expansion/expand.go
#: reads it: ``$$`` an escaped ``$``; ``$(`` up to the first ``)`` a reference; ``$(`` with no ``)``
#: and ``$`` before any other character kept as written.  Written here from that source, not
#: imported from accelctl.engines.kubernetes: the stand-in must not share the code it checks.
_KUBELET_REF = re.compile(r"\$(\$|\(([^)]*)\))", re.S)


def kubelet_expand(text: str, defined: dict[str, str]) -> str:
    """``text`` with each ``$(NAME)`` of a defined NAME replaced (an undefined one kept as written)."""
    def one(m: re.Match) -> str:
        if m.group(1) == "$":
            return "$"
        return defined.get(m.group(2), m.group(0))

    return _KUBELET_REF.sub(one, text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: the API server's name rules (k8s.io/apimachinery pkg/util/validation)
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
IANA_SVC_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")


def decode(obj, klass: str, path: str) -> tuple[dict, list[str], list[str]]:
    """``obj`` through the client's deserializer as ``klass`` and back: (what the model keeps,
    the unknown fields it dropped, the values it read as another type).  ValueError: the model
    refuses it (a required field missing)."""
    from kubernetes.client import ApiClient

    class _Response:
        data = json.dumps(obj)

    client = ApiClient()
    back = client.sanitize_for_serialization(client.deserialize(_Response(), klass))
    dropped: list[str] = []
    changed: list[str] = []

    def walk(sent, kept, where):
        if isinstance(sent, dict) and isinstance(kept, dict):
            for key, value in sent.items():
                if key not in kept:
                    if value is not None:  # a null is no field (the model writes none either)
                        dropped.append(f"{where}.{key}")
                else:
                    walk(value, kept[key], f"{where}.{key}")
        elif isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
            for n, (a, b) in enumerate(zip(sent, kept)):
                walk(a, b, f"{where}[{n}]")
        elif sent != kept or type(sent) is not type(kept):
            changed.append(f"{where}: Invalid value: {sent!r}: must be of type {type(kept).__name__}")

    walk(obj, back, path)
    return back, dropped, changed


def pod_problems(spec: dict) -> list[str]:
    """What the API server's Pod validation refuses in ``spec`` (a decoded ``V1PodSpec``), in its
    words (``field: Reason: value``), for the fields a PyTorchJob's pods use."""
    from kubernetes.client import V1Volume

    out: list[str] = []
    volumes = spec.get("volumes") or []
    names = [v.get("name", "") for v in volumes]
    sources = [V1Volume.attribute_map[a] for a in V1Volume.openapi_types if a != "name"]
    for n, v in enumerate(volumes):
        where = f"spec.volumes[{n}]"
        if not DNS1123_LABEL.fullmatch(v.get("name", "")) or len(v["name"]) > 63:
            out.append(f"{where}.name: Invalid value: {v.get('name')!r}: must be a DNS-1123 label")
        if names.count(v.get("name")) > 1:
            out.append(f"{where}.name: Duplicate value: {v.get('name')!r}")
        given = [k for k in sources if v.get(k) is not None]
        if not given:
            out.append(f"{where}: Required value: must specify a volume type")
        elif len(given) > 1:
            out.append(f"{where}: Forbidden: may not specify more than 1 volume type")
    containers = spec.get("containers") or []
    if not containers:
        out.append("spec.containers: Required value")
    for n, c in enumerate(containers):
        where = f"spec.containers[{n}]"
        if not DNS1123_LABEL.fullmatch(c.get("name", "")) or len(c["name"]) > 63:
            out.append(f"{where}.name: Invalid value: {c.get('name')!r}: must be a DNS-1123 label")
        if [x.get("name") for x in containers].count(c.get("name")) > 1:
            out.append(f"{where}.name: Duplicate value: {c.get('name')!r}")
        if not c.get("image"):
            out.append(f"{where}.image: Required value")
        for k, e in enumerate(c.get("env") or []):
            if not ENV_VAR_NAME.fullmatch(e.get("name", "")):
                out.append(f"{where}.env[{k}].name: Invalid value: {e.get('name')!r}: a valid environment variable "
                           "name must consist of alphabetic characters, digits, '_', '-', or '.', and must not "
                           "start with a digit")
        for k, port in enumerate(c.get("ports") or []):
            if not 1 <= port.get("containerPort", 0) <= 65535:
                out.append(f"{where}.ports[{k}].containerPort: Invalid value: {port.get('containerPort')!r}: must "
                           "be between 1 and 65535, inclusive")
            name = port.get("name")
            if name is not None and (len(name) > 15 or not IANA_SVC_NAME.fullmatch(name) or "--" in name
                                     or not re.search("[a-z]", name)):
                out.append(f"{where}.ports[{k}].name: Invalid value: {name!r}: must be an IANA_SVC_NAME")
        paths = []
        for k, m in enumerate(c.get("volumeMounts") or []):
            if m.get("name") not in names:
                out.append(f'{where}.volumeMounts[{k}].name: Not found: "{m.get("name")}"')
            if not m.get("mountPath"):
                out.append(f"{where}.volumeMounts[{k}].mountPath: Required value")
            elif m["mountPath"] in paths:
                out.append(f"{where}.volumeMounts[{k}].mountPath: Invalid value: {m['mountPath']!r}: must be unique")
            paths.append(m.get("mountPath"))
    return out


class Pod:
    """One replica's pod: its container's command and environment as the kubelet expands them,
    its PVC mounts (mount path -> local folder), and its process once started (None: Pending,
    ``pending`` says why)."""

    def __init__(self, name: str, namespace: str, job: str, rtype: str, argv: list[str], env: dict[str, str],
                 log: Path, mounts: dict[str, Path] | None = None, pending: str = "",
                 container_env: dict[str, str] | None = None):
        self.name, self.namespace, self.job, self.rtype = name, namespace, job, rtype
        self.argv, self.env, self.mounts, self.pending = argv, env, dict(mounts or {}), pending
        #: the container's own variables and the operator's, expanded (``env``: with this process's)
        self.container_env = dict(container_env or {})
        self.log = log
        self.proc: subprocess.Popen | None = None
        with open(log, "wb") as out:
            if not pending:
                self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                             start_new_session=True)

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def local(self, path: str) -> Path | None:
        """The local file the container's ``path`` is, through its PVC mounts (None: no volume
        is mounted there)."""
        for mount, folder in sorted(self.mounts.items(), key=lambda m: -len(m[0])):
            if path == mount or path.startswith(mount.rstrip("/") + "/"):
                return folder / path[len(mount):].lstrip("/")
        return None

    def to_dict(self) -> dict:
        rc = self.poll()
        if self.proc is None:
            state = {"waiting": {"reason": "ContainerCreating"}}
            phase = "Pending"
        else:
            state = {"running": {}} if rc is None else {"terminated": {"exitCode": rc, "reason": "Completed" if rc == 0
                                                                       else "Error"}}
            phase = "Running" if rc is None else ("Succeeded" if rc == 0 else "Failed")
        status = {"phase": phase, "containerStatuses": [
            {"name": "pytorch", "image": "loopback", "imageID": "", "ready": self.proc is not None and rc is None,
             "restartCount": 0, "state": state}]}
        if self.pending:
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": self.pending}]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"training.kubeflow.org/job-name": self.job,
                                        "training.kubeflow.org/replica-type": self.rtype}},
                "status": status}

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue


class Job:
    def __init__(self, body: dict, root: Path, claims: dict[str, Path] | None = None, run_containers: bool = True):
        self.body = body
        self.name, self.namespace = body["metadata"]["name"], body["metadata"].get("namespace", "default")
        self.deleting = False
        self.pods: dict[str, Pod] = {}
        #: the operator's events for the job (``FailedCreatePod: ...``)
        self.events: list[str] = []
        claims = claims or {}
        spec = body["spec"]
        replicas = spec["pytorchReplicaSpecs"]
        total = self.replicas = sum(r["replicas"] for r in replicas.values())
        nproc = int(spec.get("nprocPerNode", "1"))
        master_port = _free_port()
        for rtype in ("Master", "Worker"):
            for i in range(replicas.get(rtype, {}).get("replicas", 0)):
                name = f"{self.name}-{rtype.lower()}-{i}"
                pod_spec = replicas[rtype]["template"]["spec"]
                problems = pod_problems(pod_spec)
                if problems:  # the API server refuses the operator's pod
                    self.events.append(f"FailedCreatePod: Pod {name!r} is invalid: {'; '.join(problems)}")
                    continue
                rank = i + 1 if rtype == "Worker" else i
                container = pod_spec["containers"][0]
                env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
                defined: dict[str, str] = {}
                for e in container.get("env", []):  # each value may refer to the ones before it
                    defined[e["name"]] = kubelet_expand(e.get("value", ""), defined)
                operator = {"PYTHONUNBUFFERED": "0", "MASTER_PORT": str(master_port), "MASTER_ADDR": "127.0.0.1",
                            "WORLD_SIZE": str(total * nproc), "RANK": str(rank), "PET_NPROC_PER_NODE": str(nproc),
                            "PET_NODE_RANK": str(rank), "PET_NNODES": str(total)}
                defined.update(operator)
                argv = [kubelet_expand(a, defined) for a in [*container["command"], *container.get("args", [])]]
                if argv[0] == "python":
                    argv[0] = sys.executable
                mounts, pending = self._mounts(pod_spec, container, claims)
                if not pending and not run_containers:
                    pending = "the loopback runs no containers (run_containers=False)"
                self.pods[name] = Pod(name, self.namespace, self.name, rtype.lower(), argv, {**env, **defined},
                                      root / f"{name}.log", mounts, pending, defined)
        threading.Thread(target=self._clean, daemon=True).start()

    @staticmethod
    def _mounts(pod_spec: dict, container: dict, claims: dict[str, Path]) -> tuple[dict[str, Path], str]:
        """(mount path -> local folder of each PVC mount, why the pod cannot start: "" when it can)."""
        volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
        mounts: dict[str, Path] = {}
        for m in container.get("volumeMounts", []):
            claim = (volumes[m["name"]].get("persistentVolumeClaim") or {}).get("claimName")
            if claim is None:
                continue  # emptyDir (/dev/shm: the host's here)
            if claim not in claims:
                return {}, f'0/1 nodes are available: persistentvolumeclaim "{claim}" not found'
            if Path(m["mountPath"]) != claims[claim]:
                return {}, (f"loopback: PVC {claim} is the folder {claims[claim]} here and can only be mounted there, "
                            f"not at {m['mountPath']}")
            mounts[m["mountPath"]] = claims[claim]
        return mounts, ""

    def _clean(self) -> None:
        """cleanPodPolicy Running: once one pod failed, stop the others."""
        while not self.deleting:
            codes = [p.proc.poll() for p in self.pods.values() if p.proc is not None]
            if any(c not in (None, 0) for c in codes):
                for p in self.pods.values():
                    p.stop()
                return
            if all(c is not None for c in codes):
                return
            time.sleep(0.1)

    def conditions(self) -> list[dict]:
        out = [{"type": "Created", "status": "True"}]
        if len(self.pods) < self.replicas or any(p.proc is None for p in self.pods.values()):
            return out  # a pod not created, or not started: the operator waits
        codes = [p.proc.poll() for p in self.pods.values()]
        if any(c is None for c in codes) and not any(c not in (None, 0) for c in codes):
            out.append({"type": "Running", "status": "True"})
        elif any(c not in (None, 0) for c in codes):
            out += [{"type": "Running", "status": "False"}, {"type": "Failed", "status": "True"}]
        else:
            out += [{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]
        return out

    def delete(self, on_gone) -> None:
        self.deleting = True

        def run():
            for p in self.pods.values():
                p.stop()
            on_gone()

        threading.Thread(target=run, daemon=True).start()


#: what ``kubectl create -f`` reads before it posts a PyTorchJob: discovery, then the OpenAPI v3
#: document that tells it the server takes ``fieldValidation`` (module doc)
_GVK = {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}
DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get", "list"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "kubeflow.org", "versions": [{"groupVersion": "kubeflow.org/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "kubeflow.org/v1", "version": "v1"}}]},
    "/apis/kubeflow.org/v1": {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "kubeflow.org/v1",
                              "resources": [{"name": "pytorchjobs", "singularName": "pytorchjob", "namespaced": True,
                                             "kind": "PyTorchJob", "verbs": ["create", "delete", "get"]}]},
    "/openapi/v3": {"paths": {"apis/kubeflow.org/v1": {
        "serverRelativeURL": "/openapi/v3/apis/kubeflow.org/v1?hash=loopback"}}},
    "/openapi/v3/apis/kubeflow.org/v1": {
        "openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.31.0-loopback"}, "components": {},
        "paths": {"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}": {"patch": {
            "x-kubernetes-group-version-kind": _GVK, "responses": {},
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]}}}},
}


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class LoopbackCluster:
    def __init__(self, root: Path, claims: dict[str, Path] | None = None, run_containers: bool = True):
        """``claims``: the PVCs that exist (name -> the local folder that is the volume);
        ``run_containers``: start each pod's command (False: pods created, none started)."""
        self.root = root
        self.claims = {name: Path(folder) for name, folder in (claims or {}).items()}
        self.run_containers = run_containers
        self.jobs: dict[tuple[str, str], Job] = {}
        self.requests: list[tuple[str, str]] = []
        #: each job created: (its name, the request's fieldValidation)
        self.creates: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the log is streamed chunked, as the API server does

            def log_message(self, *args):
                pass

            def do_GET(self):
                cluster.handle(self, "GET")

            def do_POST(self):
                cluster.handle(self, "POST")

            def do_DELETE(self):
                cluster.handle(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self) -> str:
        return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "loopback",
                           "clusters": [{"name": "loopback", "cluster": {"server": self.url}}],
                           "users": [{"name": "u", "user": {"token": "loopback"}}],
                           "contexts": [{"name": "loopback", "context": {"cluster": "loopback", "user": "u"}}]})

    def close(self) -> list[int]:
        """Stop the server and every pod; the pids that were still running."""
        self.server.shutdown()
        left = []
        for job in self.jobs.values():
            for pod in job.pods.values():
                if pod.proc is not None and pod.proc.poll() is None:
                    left.append(pod.proc.pid)
                    pod.stop(grace_s=1)
        return left

    def all_pods(self) -> list[Pod]:
        return [p for job in self.jobs.values() for p in job.pods.values()]

    # ..................................................................... REST
    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(h.path)
        query = parse_qs(url.query)
        parts = url.path.strip("/").split("/")
        with self.lock:
            self.requests.append((method, url.path))
        if url.path in DISCOVERY:
            return self._json(h, 200, DISCOVERY[url.path])
        if url.path.rstrip("/") == "/version":
            return self._json(h, 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-loopback", "gitCommit": "",
                                       "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "",
                                       "platform": "linux/amd64"})
        if url.path.startswith(JOBS) and parts[-1 if method == "POST" else -2] == "pytorchjobs":
            ns = parts[4]
            if method == "POST":
                body = json.loads(h.rfile.read(int(h.headers["Content-Length"])))
                body, warnings, refusal = self._admit(body, query.get("fieldValidation", ["Warn"])[0])
                if refusal is not None:
                    return self._json(h, refusal["code"], refusal)
                if query.get("dryRun"):
                    return self._json(h, 201, body, warnings)
                key = (ns, body["metadata"]["name"])
                if key in self.jobs:
                    return self._json(h, 409, _status(409, "AlreadyExists",
                                                      f'pytorchjobs.kubeflow.org "{key[1]}" already exists'))
                body["metadata"]["uid"] = str(uuid.uuid4())  # as the API server assigns one
                self.creates.append((key[1], query.get("fieldValidation", [""])[0]))
                self.jobs[key] = Job(body, self.root, self.claims, self.run_containers)
                return self._json(h, 201, body, warnings)
            job = self.jobs.get((ns, parts[-1]))
            if job is None:
                return self._json(h, 404, {"kind": "Status", "message": "not found", "code": 404})
            if method == "DELETE":
                job.delete(lambda: self.jobs.pop((ns, job.name), None))
                return self._json(h, 200, job.body)
            body = {**job.body, "status": {"conditions": job.conditions()}}
            if job.deleting:  # foreground deletion, as the API server shows it until the pods are gone
                body["metadata"] = {**body["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z",
                                    "finalizers": ["foregroundDeletion"]}
            return self._json(h, 200, body)
        if url.path.startswith(PODS) and parts[-1] == "pods":
            selector = dict(kv.split("=", 1) for kv in query.get("labelSelector", [""])[0].split(",") if kv)
            items = [p.to_dict() for p in self.all_pods()
                     if all(p.to_dict()["metadata"]["labels"].get(k) == v for k, v in selector.items())
                     and (p.namespace, p.job) in self.jobs]
            return self._json(h, 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})
        if url.path.startswith(PODS) and "pods" in parts:
            name = parts[parts.index("pods") + 1]
            pod = next((p for p in self.all_pods() if p.name == name), None)
            if pod is None:
                return self._json(h, 404, {"kind": "Status", "message": f"pods {name} not found", "code": 404})
            if parts[-1] == "log":
                if pod.proc is None:
                    return self._json(h, 400, _status(400, "BadRequest", f'container "pytorch" in pod "{name}" is '
                                                      "waiting to start: ContainerCreating"))
                return self._log(h, pod, follow=query.get("follow", [""])[0].lower() == "true")
            return self._json(h, 200, pod.to_dict())
        return self._json(h, 404, {"kind": "Status", "message": f"no route {url.path}", "code": 404})

    @staticmethod
    def _admit(body: dict, validation: str) -> tuple[dict, list[str], dict | None]:
        """The job as the API server keeps it: each replica's pod template through the client's
        ``V1PodTemplateSpec`` (module doc); (the body, its warnings, a refusal Status or None)."""
        name = body.get("metadata", {}).get("name", "")
        dropped, invalid = [], []
        for rtype, replica in (body.get("spec", {}).get("pytorchReplicaSpecs") or {}).items():
            where = f"spec.pytorchReplicaSpecs.{rtype}.template"
            try:
                kept, lost, changed = decode(replica.get("template", {}), "V1PodTemplateSpec", where)
            except ValueError as exc:
                invalid.append(f"{where}: Invalid value: {exc}")
                continue
            replica["template"] = kept
            dropped += lost
            invalid += changed
        if invalid:
            return body, [], _status(422, "Invalid", f'PyTorchJob.kubeflow.org "{name}" is invalid: '
                                     + "; ".join(invalid))
        if dropped and validation == "Strict":
            return body, [], _status(400, "BadRequest", "strict decoding error: "
                                     + ", ".join(f'unknown field "{d}"' for d in dropped))
        return body, ([] if validation == "Ignore" else [f'unknown field "{d}"' for d in dropped]), None

    def _json(self, h, code: int, obj: dict, warnings: list[str] = ()) -> None:
        data = json.dumps(obj).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        for w in warnings:  # RFC 7234 warn-code 299, as the API server sends them
            h.send_header("Warning", '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"')
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _log(self, h, pod: Pod, follow: bool) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def send(data: bytes) -> None:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        with open(pod.log, "rb") as fh:
            while True:
                chunk = fh.read(65536)
                if chunk:
                    send(chunk)
                    continue
                if not follow or pod.proc.poll() is not None:
                    rest = fh.read()
                    if rest:
                        send(rest)
                    break
                time.sleep(0.1)
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

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


class Pod:
    def __init__(self, name: str, namespace: str, job: str, rtype: str, argv: list[str], env: dict[str, str],
                 log: Path):
        self.name, self.namespace, self.job, self.rtype = name, namespace, job, rtype
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def to_dict(self) -> dict:
        rc = self.proc.poll()
        state = {"running": {}} if rc is None else {"terminated": {"exitCode": rc, "reason": "Completed" if rc == 0
                                                                   else "Error"}}
        phase = "Running" if rc is None else ("Succeeded" if rc == 0 else "Failed")
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"training.kubeflow.org/job-name": self.job,
                                        "training.kubeflow.org/replica-type": self.rtype}},
                "status": {"phase": phase, "containerStatuses": [
                    {"name": "pytorch", "image": "loopback", "imageID": "", "ready": rc is None, "restartCount": 0,
                     "state": state}]}}

    def stop(self, grace_s: float = 5.0) -> None:
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
    def __init__(self, body: dict, root: Path):
        self.body = body
        self.name, self.namespace = body["metadata"]["name"], body["metadata"].get("namespace", "default")
        self.deleting = False
        self.pods: dict[str, Pod] = {}
        spec = body["spec"]
        replicas = spec["pytorchReplicaSpecs"]
        total = sum(r["replicas"] for r in replicas.values())
        nproc = int(spec.get("nprocPerNode", "1"))
        master_port = _free_port()
        for rtype in ("Master", "Worker"):
            for i in range(replicas.get(rtype, {}).get("replicas", 0)):
                rank = i + 1 if rtype == "Worker" else i
                container = replicas[rtype]["template"]["spec"]["containers"][0]
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
                name = f"{self.name}-{rtype.lower()}-{i}"
                self.pods[name] = Pod(name, self.namespace, self.name, rtype.lower(), argv, {**env, **defined},
                                      root / f"{name}.log")
        threading.Thread(target=self._clean, daemon=True).start()

    def _clean(self) -> None:
        """cleanPodPolicy Running: once one pod failed, stop the others."""
        while not self.deleting:
            codes = [p.proc.poll() for p in self.pods.values()]
            if any(c not in (None, 0) for c in codes):
                for p in self.pods.values():
                    p.stop()
                return
            if all(c is not None for c in codes):
                return
            time.sleep(0.1)

    def conditions(self) -> list[dict]:
        codes = [p.proc.poll() for p in self.pods.values()]
        out = [{"type": "Created", "status": "True"}]
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


class LoopbackCluster:
    def __init__(self, root: Path):
        self.root = root
        self.jobs: dict[tuple[str, str], Job] = {}
        self.requests: list[tuple[str, str]] = []
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
                if pod.proc.poll() is None:
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
        if url.path.rstrip("/") == "/version":
            return self._json(h, 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-loopback", "gitCommit": "",
                                       "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "",
                                       "platform": "linux/amd64"})
        if url.path.startswith(JOBS) and parts[-1 if method == "POST" else -2] == "pytorchjobs":
            ns = parts[4]
            if method == "POST":
                body = json.loads(h.rfile.read(int(h.headers["Content-Length"])))
                if query.get("dryRun"):
                    return self._json(h, 201, body)
                key = (ns, body["metadata"]["name"])
                if key in self.jobs:
                    return self._json(h, 409, {"kind": "Status", "message": "already exists", "code": 409})
                body["metadata"]["uid"] = str(uuid.uuid4())  # as the API server assigns one
                self.jobs[key] = Job(body, self.root)
                return self._json(h, 201, body)
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
                return self._log(h, pod, follow=query.get("follow", [""])[0].lower() == "true")
            return self._json(h, 200, pod.to_dict())
        return self._json(h, 404, {"kind": "Status", "message": f"no route {url.path}", "code": 404})

    def _json(self, h, code: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
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

"""torchrun multi-node: one torchrun agent per node, meeting at a c10d rendezvous.

``wrap`` turns the torchrun backend's per-node command into launches ``node0`` .. ``node<N-1>``
(``--rdzv-backend=c10d``, ``join_timeout`` always written).  On a cluster the user runs launch
``nodeI`` on node I with ``rdzv_endpoint`` at node 0 (``job.json`` on a shared filesystem);
without one the endpoint is ``127.0.0.1:{free_port}`` and the local runner starts every agent
here.  c10d assigns node ranks by arrival, so ``--node-rank`` matters only for ``static``.
``explain_failure`` turns a bare ``RendezvousTimeoutError`` into a message naming the nodes that
never joined.  The backend's check (torch's own argument parser) reads every agent's command.
"""

from __future__ import annotations

import functools
import re

from accelctl.backends.base import WORKER
from accelctl.contract.plan import FREE_PORT, Launch, Plan
from accelctl.engines import torchrun_settings
from accelctl.engines.base import Engine, engine_refusal
from accelctl.workload.types import TargetSpec, WorkloadSpec
from accelctl.frozen import replace

#: the code of a torchrun engine setting that cannot work
CODE = torchrun_settings.ROW.code
DEFAULT_HOST = "127.0.0.1"
DEFAULT_JOIN_TIMEOUT_S = 600
#: a host name, an IPv4 address or a bracketed IPv6 address; a port
_ENDPOINT = re.compile(r"^(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")
#: a rendezvous id: letters, digits, '.', '_', '-' (it names c10d store keys and log lines)
_RDZV_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
TIMEOUT_MARK = "RendezvousTimeoutError"


_refuse = functools.partial(engine_refusal, CODE, "torchrun")


def default_rdzv_id(spec: WorkloadSpec, target: TargetSpec) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", f"{spec.name}-{target.name}")[:64]


def endpoint(spec: WorkloadSpec, target: TargetSpec, settings: dict) -> tuple[str, str]:
    """(host, port) of the rendezvous; port may be ``{free_port}``."""
    text = settings.get("rdzv_endpoint")
    if text is None:
        return DEFAULT_HOST, FREE_PORT
    m = _ENDPOINT.match(str(text))
    if m is None or not 0 < int(m["port"]) < 65536:
        raise _refuse(spec, target, "rdzv_endpoint", f"rdzv_endpoint {text!r} is not HOST:PORT",
                      'write the address of node 0 and a port 1..65535, e.g. rdzv_endpoint = "10.0.0.1:29400"')
    return m["host"], m["port"]


class TorchrunEngine(Engine):
    row = torchrun_settings.ROW
    backends = ("torchrun",)

    def wrap(self, spec, target, built, job, settings):
        s = dict(settings.settings)
        host, port = endpoint(spec, target, s)
        rdzv_id = str(s.get("rdzv_id") or default_rdzv_id(spec, target))
        if not _RDZV_ID.match(rdzv_id):
            raise _refuse(spec, target, "rdzv_id", f"rdzv_id {rdzv_id!r} is not a safe token",
                          "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        backend = s.get("rdzv_backend", "c10d")
        join_s = s.get("join_timeout", DEFAULT_JOIN_TIMEOUT_S)
        if not join_s or join_s < 1:
            raise _refuse(spec, target, "join_timeout", f"join_timeout {join_s:g} s is below 1 s",
                          "torch reads it in whole seconds; e.g. join_timeout = 10 min")
        join_s = round(join_s)
        restarts = int(s.get("max_restarts", 0))
        (launch,) = built.launches
        n = target.nodes
        head = ["torchrun", f"--nnodes={n}", f"--nproc-per-node={target.devices}"]
        if backend == "static":
            master_port = str(s.get("master_port") or port)
            rdzv = [f"--master-addr={host}", f"--master-port={master_port}"]
        else:
            if "master_port" in s:
                raise _refuse(spec, target, "master_port", "master_port is for rdzv_backend = static",
                              "c10d picks the workers' master port itself; set the rendezvous port in rdzv_endpoint")
            rdzv = [f"--rdzv-backend={backend}", f"--rdzv-endpoint={host}:{port}", f"--rdzv-id={rdzv_id}",
                    f"--rdzv-conf=join_timeout={join_s}"]
        launches = [Launch(f"node{i}", (*head, f"--node-rank={i}", *rdzv, f"--max-restarts={restarts}", *WORKER),
                           launch.env, processes=target.devices)
                    for i in range(n)]
        notes = [*built.notes,
                 (f"{n} torchrun agents ({backend} rendezvous {rdzv_id} at {host}:{port}, join_timeout {join_s} s): "
                  "run launch nodeI on node I; accelctl run starts all of them on this machine")]
        warnings = list(built.warnings)
        if host in ("127.0.0.1", "localhost") and n > 1 and s.get("rdzv_endpoint") is None:
            notes.append("rendezvous on loopback (no rdzv_endpoint): every node on this machine; for a cluster set "
                         'engine torchrun { rdzv_endpoint = "NODE0:PORT" }')
        return replace(built, launches=launches, notes=notes, warnings=warnings)

    def explain_failure(self, plan: Plan, log_text: str, started: dict[str, bool],
                        values: dict[str, str] | None = None) -> str | None:
        """The rendezvous timing out, in words: which nodes never joined.  ``started``: launch
        name -> whether this runner started it and it was still running when the first agent
        gave up (False: never started here, or ended before); ``values``: the run's
        ``{free_port}``."""
        if TIMEOUT_MARK not in log_text:
            return None
        argv = plan.launches[0].argv if plan.launches else ()
        for placeholder, value in (values or {}).items():
            argv = tuple(a.replace(placeholder, value) for a in argv)
        opt = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("--") and "=" in a}
        conf = dict(kv.split("=", 1) for kv in opt.get("--rdzv-conf", "").split(",") if "=" in kv)
        missing = [ln.name.removeprefix("node") for ln in plan.launches if not started.get(ln.name, False)]
        who = (f"node(s) {', '.join(missing)} never joined" if missing
               else "not every node joined (all agents of this run were running: is the endpoint reachable from each?)")
        return (f"rendezvous {opt.get('--rdzv-id', '?')} at {opt.get('--rdzv-endpoint', '?')} timed out after "
                f"{conf.get('join_timeout', '?')} s: {who}")

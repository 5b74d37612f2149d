"""The container entrypoint of an ``aws_batch`` plan: ``python -m accelctl.engines.batch_entrypoint``.

AWS Batch starts it on every node (``AWS_BATCH_JOB_*``), the children only once the main node
runs and in no guaranteed order, so the nodes join here: every other node connects over TCP to
the main node (``ACCELCTL_BATCH_COORD_PORT``) and sends its index; the main node takes each
address from the connection, waits for every index (``ACCELCTL_BATCH_JOIN_TIMEOUT``, which must
cover an image pull) and answers with the hosts; every node then writes the same hostfile and
starts DeepSpeed's per-node launch (``--no_ssh --node_rank``).  The launch comes from
``ACCELCTL_BATCH_NODE``, the run folder is ``ACCELCTL_RUN_DIR``.  Every value from the environment
is validated and every command is an argv list: nothing reaches a shell.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path, PurePosixPath

from accelctl.contract import launchers

RUN_DIR = "{run_dir}"
NODE_ENV = "ACCELCTL_BATCH_NODE"
DEFAULT_COORD_PORT = 29400
DEFAULT_JOIN_TIMEOUT = 600.0


class NodeError(RuntimeError):
    """The node cannot take part: a bad environment value, a missing peer, a bad message."""


def env_int(env, name: str, low: int = 0, high: int = 1 << 16, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None and default is not None:
        return default
    if raw is None or not re.fullmatch(r"[0-9]{1,6}", raw.strip()) or not low <= int(raw) <= high:
        raise NodeError(f"{name}={raw!r} is not an integer in [{low}, {high}]")
    return int(raw)


def plain_ip(text) -> str:
    """``text`` as an IP address without a scope id (``ipaddress`` takes anything after '%', a
    newline and ``slots=1`` included: never a hostfile line); ValueError otherwise."""
    import ipaddress

    ip = ipaddress.ip_address(text)
    if getattr(ip, "scope_id", None) is not None:
        raise ValueError(f"{text!r} has a scope id")
    return str(ip)


def env_ip(env, name: str) -> str:
    raw = env.get(name, "")
    try:
        return plain_ip(raw.strip())
    except ValueError:
        raise NodeError(f"{name}={raw!r} is not an IP address") from None


def node_argv(argv: list[str], *, master: str, rank: int) -> list[str]:
    """The plan's ``deepspeed`` argv as node ``rank`` runs it: ``--master_addr MAIN --no_ssh
    --node_rank R`` after the head (a ``--master_addr`` already there is replaced)."""
    out, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a == "--master_addr":
            skip = True
        elif not a.startswith("--master_addr="):
            out.append(a)
    return [argv[0], "--master_addr", master, "--no_ssh", "--node_rank", str(rank), *out]


def hostfile_of(argv: list[str]) -> str | None:
    return argv[argv.index("--hostfile") + 1] if "--hostfile" in argv[:-1] else None


def _send(conn: socket.socket, obj: dict) -> None:
    conn.sendall((json.dumps(obj) + "\n").encode())


def _recv(conn: socket.socket, limit: int = 1 << 16) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk or len(data) > limit:
            raise NodeError("the other node closed the connection before a full message")
        data += chunk
    msg = json.loads(data)
    if not isinstance(msg, dict):
        raise NodeError(f"unexpected message {msg!r}")
    return msg


def gather(index: int, num: int, port: int, timeout: float) -> tuple[list[str], str]:
    """Main node: wait for every other node; answer each with the hosts.  (hosts, own address)."""
    import ipaddress
    import socket  # here, not at the top: planning imports this module for node_argv, validate too

    peers: dict[int, tuple[str, socket.socket]] = {}
    own = ""
    deadline = time.monotonic() + timeout
    with socket.create_server(("", port), reuse_port=False) as srv:
        while len(peers) < num - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(num)) - {index} - set(peers))
                raise NodeError(f"node(s) {missing} did not report to the main node within {timeout:.0f} s")
            srv.settimeout(left)
            try:
                conn, (addr, _) = srv.accept()
            except TimeoutError:
                continue
            conn.settimeout(30)
            try:
                node = _recv(conn).get("node")
            except (NodeError, ValueError, OSError) as e:
                print(f"batch_entrypoint: ignored a connection from {addr}: {e}", file=sys.stderr)
                conn.close()
                continue
            if not isinstance(node, int) or not 0 <= node < num or node == index or node in peers:
                print(f"batch_entrypoint: ignored node {node!r} from {addr}", file=sys.stderr)
                conn.close()
                continue
            own = own or conn.getsockname()[0]
            peers[node] = (str(ipaddress.ip_address(addr)), conn)
    hosts = [own or "127.0.0.1"] + [peers[i][0] for i in sorted(peers)]
    for _, conn in peers.values():
        with conn:
            _send(conn, {"hosts": hosts, "master": hosts[0]})
    return hosts, hosts[0]


def report(index: int, main: str, port: int, timeout: float, bind: str | None) -> tuple[list[str], str]:
    """Other node: report to the main node (retrying until it listens); (hosts, master address)."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = socket.create_connection((main, port), timeout=5, source_address=(bind, 0) if bind else None)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                raise NodeError(f"node {index} could not reach the main node {main}:{port} within "
                                f"{timeout:.0f} s: {e}") from None
            time.sleep(0.5)
    with conn:
        _send(conn, {"node": index})
        conn.settimeout(max(1.0, deadline - time.monotonic()))
        msg = _recv(conn)
    try:
        hosts = [plain_ip(h) for h in msg.get("hosts", [])]
        return hosts, plain_ip(msg.get("master", ""))
    except (ValueError, TypeError) as e:
        raise NodeError(f"node {index}: the main node's answer is not a list of IP addresses: {e}") from None


def unpack(node: dict, run_dir: Path) -> None:
    """The run folder's files, ``{run_dir}`` filled in, ``job.json`` with its events folder
    (data, as the files under ``data``: its strings are written as they are, a prompt's
    ``{run_dir}`` too)."""
    files = {name: content.replace(RUN_DIR, str(run_dir)) for name, content in dict(node.get("files", {})).items()}
    files.update(dict(node.get("data", {})))
    job = dict(node["job"], run_id=run_dir.name, events_dir=str(run_dir))
    files["job.json"] = json.dumps(job, indent=2, sort_keys=True)
    for name, content in files.items():
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise NodeError(f"refusing to write {name!r} outside the run folder")
        path = run_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def run_node(env) -> int:
    index = env_int(env, "AWS_BATCH_JOB_NODE_INDEX")
    num = env_int(env, "AWS_BATCH_JOB_NUM_NODES", 1)
    main_index = env_int(env, "AWS_BATCH_JOB_MAIN_NODE_INDEX", default=0)
    if not (index < num and main_index < num):
        raise NodeError(f"node index {index} / main node {main_index} out of range for {num} node(s)")
    port = env_int(env, "ACCELCTL_BATCH_COORD_PORT", 1, 65535, DEFAULT_COORD_PORT)
    timeout = float(env_int(env, "ACCELCTL_BATCH_JOIN_TIMEOUT", 1, 86400, int(DEFAULT_JOIN_TIMEOUT)))
    bind = env_ip(env, "ACCELCTL_BATCH_NODE_ADDRESS") if env.get("ACCELCTL_BATCH_NODE_ADDRESS") else None
    try:
        node = json.loads(env[NODE_ENV])
        argv, slots = [str(a) for a in node["argv"]], int(node["slots"])
    except (KeyError, ValueError, TypeError) as e:
        raise NodeError(f"{NODE_ENV} is missing or not the plan's node launch: {e}") from None
    run_dir = Path(env.get("ACCELCTL_RUN_DIR") or "/tmp/accelctl-run").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    unpack(node, run_dir)
    if num > 1:
        if index == main_index:
            hosts, master = gather(index, num, port, timeout)
        else:
            hosts, master = report(index, env_ip(env, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"), port,
                                   timeout, bind)
        if len(hosts) != num or len(set(hosts)) != num:
            raise NodeError(f"the nodes reported {hosts}: DeepSpeed needs {num} distinct hosts")
        ranks = [main_index] + sorted(set(range(num)) - {main_index})
        argv = [a.replace(RUN_DIR, str(run_dir)) for a in argv]
        hostfile = hostfile_of(argv) or str(run_dir / "hostfile")
        Path(hostfile).write_text("".join(f"{h} slots={slots}\n" for h in hosts), encoding="utf-8")
        argv = node_argv(argv, master=master, rank=ranks.index(index))
        print(f"batch_entrypoint: node {index}/{num}, rank {ranks.index(index)}, hosts {hosts}", flush=True)
    argv = [a.replace(RUN_DIR, str(run_dir)) for a in argv]
    if argv[0] in launchers.HEADS:
        argv[:1] = launchers.command(argv[0], sys.executable)
    child_env = {k: v.replace(RUN_DIR, str(run_dir)) for k, v in env.items() if k != NODE_ENV}
    child_env.setdefault("ACCELCTL_EVENTS_DIR", str(run_dir))
    import signal
    import subprocess

    child = subprocess.Popen(argv, env=child_env)  # an argv list: no shell
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    return child.wait()


def main() -> int:
    try:
        return run_node(os.environ)
    except NodeError as e:
        print(f"batch_entrypoint: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

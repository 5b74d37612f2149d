"""A real Slurm cluster for the engine tests: munged, slurmctld and two slurmd nodes on this host.

``slurm_cluster`` (session scope) writes a slurm.conf under a tmp folder (free ports, the
two-fake-nodes layout of Debian's ``MULTIPLE_SLURMD`` build: ``slurmd -N n1`` / ``-N n2``,
each with its own port), starts every daemon in the foreground as a child of this process
(munged as the munge user), waits until ``sinfo`` shows two idle nodes and sets
``SLURM_CONF`` for the clients.  Teardown stops each daemon it started by its pid and
asserts none is left; a pytest that ends without its teardown (SIGKILL, a CI timeout) leaves
none either: ``slurm_watchdog.py`` ends their sessions when its pipe from this process closes.  Without the daemons (``apt-get install slurmctld slurmd
slurm-client munge``, which ``scripts/setup.sh --test`` does as root) or without root the
tests that use it skip, saying which.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
#: the daemons live in sbin, which a non-login PATH (CI's, cron's, env -i) may leave out
PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])


def slurm_missing() -> str:
    missing = [d for d in DAEMONS if shutil.which(d, path=PATH) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurmctld slurmd " \
               "slurm-client munge, or scripts/setup.sh --test as root"
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root (slurmd runs jobs as their user)"
    return ""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _conf(root: Path, munge_socket: Path, ctl_port: int, n1: int, n2: int) -> str:
    return f"""ClusterName=accelctltest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctl_port}
SlurmdPort={n1}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
SlurmdTimeout=300
InactiveLimit=0
KillWait=5
MailProg=/bin/true
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n1} CPUs=1 RealMemory=4000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n2} CPUs=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    def __init__(self, root: Path, conf: Path, env: dict[str, str]):
        self.root, self.conf, self.env = root, conf, env

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, check=False, capture_output=True, text=True, timeout=30)

    def queue(self) -> str:
        return self.run("squeue", "-h").stdout.strip()


@pytest.fixture(scope="session")
def slurm_cluster():
    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    # not under pytest's 0700 tmp folders: munged (the munge user) must reach its socket
    root = Path(tempfile.mkdtemp(prefix="accelctl-slurm-"))
    for d in ("state", "spool", "run", "log"):
        (root / d).mkdir()
    munge_dir = root / "munge"
    munge_dir.mkdir()
    shutil.chown(munge_dir, "munge", "munge")
    munge_dir.chmod(0o755)
    root.chmod(0o755)
    sock = munge_dir / "munge.socket.2"
    ctl, n1, n2 = _free_ports(3)
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, sock, ctl, n1, n2), encoding="utf-8")
    env = dict(os.environ, SLURM_CONF=str(conf), PATH=PATH)
    logs = open(root / "log" / "daemons.out", "ab")  # noqa: SIM115
    procs: list[subprocess.Popen] = []
    # ends the daemons when this pytest ends without its teardown (SIGKILL, a CI timeout)
    watchdog = subprocess.Popen([sys.executable, str(Path(__file__).with_name("slurm_watchdog.py")), str(root)],
                                stdin=subprocess.PIPE, stdout=logs, stderr=subprocess.STDOUT, start_new_session=True)

    def start(*argv: str) -> None:
        procs.append(subprocess.Popen(list(argv), env=env, stdout=logs, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True))
        watchdog.stdin.write(f"{procs[-1].pid}\n".encode())  # its session's id: each leads its own
        watchdog.stdin.flush()

    old = os.environ.get("SLURM_CONF")
    try:
        start("runuser", "-u", "munge", "--", "munged", "--foreground", f"--socket={sock}",
              f"--pid-file={munge_dir}/munged.pid", f"--log-file={munge_dir}/munged.log",
              f"--seed-file={munge_dir}/munged.seed")
        deadline = time.monotonic() + 20
        while not sock.exists():
            assert procs[0].poll() is None, (root / "log" / "daemons.out").read_text()
            assert time.monotonic() < deadline, "munged did not open its socket in 20 s"
            time.sleep(0.05)
        start("slurmctld", "-D", "-f", str(conf))
        start("slurmd", "-D", "-f", str(conf), "-N", "n1")
        start("slurmd", "-D", "-f", str(conf), "-N", "n2")
        cluster = SlurmCluster(root, conf, env)
        deadline = time.monotonic() + 60
        while True:
            out = cluster.run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split()
            if out.count("idle") == 2:
                break
            dead = [p.args for p in procs if p.poll() is not None]
            assert not dead, f"{dead} exited; see {root}/log"
            assert time.monotonic() < deadline, f"sinfo never showed 2 idle nodes: {out}; see {root}/log"
            time.sleep(0.1)
        os.environ["SLURM_CONF"] = str(conf)
        yield cluster
        subprocess.run(["scancel", "--full", "-u", "root"], env=env, check=False, capture_output=True)
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        for p in reversed(procs):  # slurmds, the controller, then munged
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        watchdog.communicate(b"forget\n", timeout=30)  # ended here: nothing for it to do
        logs.close()
        left = [p.args for p in procs if p.poll() is None]
        assert not left, f"daemons left running: {left}"
        stepds = [d.name for d in Path("/proc").iterdir() if d.name.isdigit() and _comm(d) == "slurmstepd"]
        assert not stepds, f"slurmstepd left running: {stepds}"
        shutil.rmtree(root, ignore_errors=True)


def _comm(d: Path) -> str:
    try:
        return (d / "comm").read_text().strip()
    except OSError:
        return ""

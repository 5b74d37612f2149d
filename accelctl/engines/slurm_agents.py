"""What runs on each node of a Slurm allocation: one launcher agent per node, per backend.

The batch script (``accelctl.engines.slurm``) finds the first host (``$addr``) and a free port
(``$port``) and ``srun``s one task per node running the backend's own launcher: torchrun's
``torch.distributed.run`` with a c10d rendezvous at ``$addr:$port``; DeepSpeed's per-node
``--no_ssh`` launcher with a hostfile written from the allocation (``--launcher slurm`` takes a
script path and exports no ranks, pdsh needs ssh between nodes); optimum-habana's command on a
one-node allocation for gaudi (its multi-node path has no per-node form).  Plan words reach the
script through ``word`` (``shlex.quote``, placeholders as script variables); ``node_launch`` turns
the agent's arguments into the one-node launch the backend's check understands.
"""

from __future__ import annotations

import re
import shlex

from accelctl.backends.deepspeed.launch import ENV_FILE, HOSTFILE
from accelctl.contract import launchers
from accelctl.contract.plan import FREE_PORT, RUN_DIR, GeneratedFile, Launch
from accelctl.frozen import Value

#: placeholder -> the script's shell expression (what it stands for on the node)
SHELL_VALUES = {RUN_DIR: '"$SLURM_SUBMIT_DIR"', FREE_PORT: '"$port"', "{optimum_habana}": '"$OPTIMUM_HABANA_DIR"'}
#: the stand-ins ``node_launch`` gives the per-node values a check cannot know
STAND_IN_ADDR, STAND_IN_PORT = "node0", "29500"
SRUN = 'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=1 \\'


_PLACEHOLDERS = re.compile("(" + "|".join(map(re.escape, SHELL_VALUES)) + ")")


def word(text: str) -> str:
    """One shell word: each placeholder becomes its shell variable, the rest is quoted."""
    return "".join(SHELL_VALUES.get(p) or shlex.quote(p) for p in _PLACEHOLDERS.split(text) if p) or "''"


def _without(args: list[str], flags: tuple[str, ...], valued: tuple[str, ...]) -> list[str]:
    """``args`` less the ``flags`` (bare) and ``valued`` options (``--x V`` or ``--x=V``)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in flags or a.split("=", 1)[0] in valued and "=" in a:
            continue
        elif a in valued:
            skip = True
        else:
            out.append(a)
    return out


class Agent(Value):
    """How one backend's per-node launcher runs under ``srun``."""

    #: the launcher, for the plan's notes
    what: str
    #: ``bash -c`` program that execs the launcher with the node's own rank (read in the task)
    program: str
    #: generated files and environment the backend wrote for its own multi-node launcher,
    #: replaced here by the allocation
    drops_files: tuple[str, ...] = ()
    drops_env: tuple[str, ...] = ()
    #: ``engine <block> {}`` settings the backend reads that the allocation decides here
    overridden: tuple[str, tuple[str, ...]] = ("", ())

    def ignored(self, spec) -> list[str]:
        """The overridden settings this workload sets (they apply to its other targets only)."""
        block, keys = self.overridden
        settings = spec.engines[block].settings if block in spec.engines else {}
        return [k for k in keys if k in settings]

    def args(self, argv: tuple[str, ...]) -> list[str]:
        """The backend's per-node arguments, without what the allocation decides."""
        raise NotImplementedError

    def setup(self, devices: int) -> list[str]:
        return []

    def flags(self) -> str:
        """The agent's own flags (shell variables of the script), one line."""
        return ""

    def lines(self, argv: tuple[str, ...], devices: int) -> list[str]:
        args = " ".join(word(a) for a in self.args(argv))
        head = [SRUN, f"  bash -c {shlex.quote(self.program)} agent \"$py\" \\"]
        flags = self.flags()
        return [*self.setup(devices), *head, *([f"  {flags} \\"] if flags else []), f"  {args}"]

    def node_launch(self, args: list[str], nodes: int, devices: int, env: dict[str, str],
                    cwd: str) -> tuple[Launch, list[GeneratedFile]]:
        """Node 0's launch as the backend would have written it (stand-in address and port)."""
        raise NotImplementedError


class TorchrunAgent(Agent):
    def args(self, argv):
        rest = list(argv[argv.index("torchrun") + 1:])
        return [a for a in rest if a != "--standalone" and not a.startswith(
            ("--nnodes", "--node_rank", "--rdzv", "--master_addr", "--master_port"))]

    def flags(self):
        return ('--nnodes="$SLURM_JOB_NUM_NODES" --rdzv_backend=c10d --rdzv_endpoint="$addr:$port" '
                '--rdzv_id="$SLURM_JOB_ID"')

    def node_launch(self, args, nodes, devices, env, cwd):
        argv = ("torchrun", f"--nnodes={nodes}", "--node_rank=0", "--rdzv_backend=c10d",
                f"--rdzv_endpoint={STAND_IN_ADDR}:{STAND_IN_PORT}", "--rdzv_id=0", *args)
        return Launch("node0", argv, env, processes=devices), []


class DeepSpeedAgent(Agent):
    def args(self, argv):
        rest = list(argv[argv.index("deepspeed") + 1:])
        return _without(rest, ("--no_ssh", "--no_ssh_check", "--force_multi"),
                        ("--hostfile", "-H", "--num_nodes", "--master_addr", "--master_port", "--node_rank",
                         "--launcher", "--launcher_args", "--include", "-i", "--exclude", "-e"))

    def setup(self, devices):
        # one line per node of the allocation, as DeepSpeed's fetch_hostfile reads it
        return [f'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/\\$/ slots={int(devices)}/" '
                f'> "$SLURM_SUBMIT_DIR/{HOSTFILE}"']

    def flags(self):
        return (f'--hostfile="$SLURM_SUBMIT_DIR/{HOSTFILE}" --num_nodes="$SLURM_JOB_NUM_NODES" --no_ssh '
                '--master_addr="$addr" --master_port="$port"')

    def node_launch(self, args, nodes, devices, env, cwd):
        argv = ("deepspeed", "--hostfile", f"{RUN_DIR}/{HOSTFILE}", "--num_nodes", str(nodes), "--no_ssh",
                "--node_rank", "0", "--master_addr", STAND_IN_ADDR, "--master_port", STAND_IN_PORT, *args)
        hostfile = GeneratedFile(HOSTFILE, "".join(f"node{i} slots={devices}\n" for i in range(nodes)),
                                 role="stand-in for the hostfile the batch script writes from the allocation")
        return Launch("node0", argv, env, processes=devices), [hostfile]


class CommandAgent(Agent):
    """A command run as the backend wrote it (``python gaudi_spawn.py ...``), in its folder."""

    def args(self, argv):
        return list(argv[1:])

    def node_launch(self, args, nodes, devices, env, cwd):
        return Launch("node0", ("python", *args), env, processes=devices, cwd=cwd), []


def _exec(head: str, flags: str = "") -> str:
    """The ``bash -c`` program of an agent: exec the node's interpreter (``$1``, the script's
    ``$py``) as ``head`` runs (``accelctl.contract.launchers``), with ``flags`` and the rest."""
    words = " ".join(launchers.command(head, '"$py"'))
    return f'py=$1; shift; exec {words} {flags}"$@"'


#: backend name -> its agent; the backends the slurm engine places
AGENTS: dict[str, Agent] = {
    "torchrun": TorchrunAgent("torchrun", _exec("torchrun", '--node_rank="$SLURM_NODEID" ')),
    "deepspeed": DeepSpeedAgent("deepspeed --no_ssh", _exec("deepspeed", '--node_rank="$SLURM_NODEID" '),
                                drops_files=(HOSTFILE, ENV_FILE), drops_env=("DS_ENV_FILE",),
                                overridden=("deepspeed", ("hosts", "hostfile", "master_addr", "master_port", "ssh",
                                                          "launcher"))),
    "gaudi": CommandAgent("optimum-habana's command", _exec("python")),
}

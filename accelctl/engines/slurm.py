"""Slurm: one batch job, one launcher agent per node, rendezvous on the allocation's first host.

``wrap`` renders ``job.sbatch`` (a generated file of the run folder): ``#SBATCH`` lines for
the nodes (``--ntasks-per-node=1``: one agent per node), CPUs per task, GPUs (``--gres=gpu:N``
where the device family is cuda, or the ``gres`` setting as written), time, partition,
account, QOS, constraint and memory from the target and the ``engine slurm {}`` block, and
``--output`` into the submit directory.  The body finds the first host of the allocation
(its ``NodeAddr``, so nodes whose names do not resolve work too), picks a free port there and
``srun``s one agent per node: the backend's own launcher with the node's rank and the
rendezvous (``torch.distributed.run`` with c10d for torchrun, DeepSpeed's ``--no_ssh``
per-node launcher for deepspeed, optimum-habana's command on one node for gaudi; see
``accelctl.engines.slurm_agents`` for each and why).  Every word that comes from the
workload is quoted with ``shlex.quote``; the settings that reach ``#SBATCH`` lines are
checked against a safe character set (E547 at the setting otherwise).

The plan's launch is the submission, ``sbatch --parsable job.sbatch`` in the run folder, made by the
run's supervisor in its own process (``accelctl.engines.slurm_scheduler``, followed by
``accelctl.run.scheduled``): ``sbatch`` in the run folder, the job followed with ``scontrol
show job`` / ``squeue`` until it ends, ``scancel`` and a wait on a stop, and ``accelctl cancel``
from any process by the job's handle ``slurm://<cluster>/<job id>``.  The ranks append
``rank<N>.jsonl`` to the run folder as for a local run.  What the script runs on each node is
also kept as data in the plan (``Plan.request``: the agent's arguments, exports, folder), so
``node_plan`` never reads the script back.

The run folder must be on a filesystem every node of the allocation sees (the script reads
``$SLURM_SUBMIT_DIR/job.json``, the ranks write their events there): true on one host, and on
clusters whose home or scratch is shared.  The nodes need the same Python environment as the
submitter: the supervisor exports ``ACCELCTL_PYTHON`` (its interpreter) and ``sbatch``
passes the submitting environment on (``--export=ALL``, Slurm's default).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import TYPE_CHECKING

from accelctl.backends.base import Built
from accelctl.contract.plan import RUN_DIR, GeneratedFile, Launch, Plan
from accelctl.engines.base import Engine, engine_refusal
from accelctl.engines import slurm_settings
from accelctl.engines.slurm_agents import AGENTS, Agent, word
from accelctl.spec.catalog import DEVICES
from accelctl.spec.types import TargetSpec, WorkloadSpec

if TYPE_CHECKING:  # plan --check's result type: planning (validate's verdict) needs none
    from accelctl.backends.findings import CheckResult

SCRIPT = "job.sbatch"
#: the submission, in the run folder (the job's $SLURM_SUBMIT_DIR, where it reads job.json)
SUBMIT = ("sbatch", "--parsable", SCRIPT)
#: the code of an engine slurm setting that cannot reach the batch script
CODE = "E547"
#: what a Slurm name (partition, account, QOS), a constraint expression (features joined by
#: & | , with [] () * counts) and a gres may hold: the engine's declared patterns (``slurm_settings``)
NAME_RE = re.compile(slurm_settings.NAME_PATTERN)
CONSTRAINT_RE = re.compile(slurm_settings.CONSTRAINT_PATTERN)
GRES_RE = re.compile(slurm_settings.GRES_PATTERN)
PATTERNS = {"partition": NAME_RE, "account": NAME_RE, "qos": NAME_RE, "constraint": CONSTRAINT_RE,
            "gres": GRES_RE}
#: what sbatch says when it cannot ask a controller (not a verdict on the script)
UNREACHABLE = ("Unable to contact slurm controller", "Could not establish a configuration source",
               "Could not open configuration file", "Communication connection failure", "Munge")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_refuse = functools.partial(engine_refusal, CODE, "slurm")


def slurm_time(seconds: float) -> str:
    """Slurm's ``D-HH:MM:SS`` for a time limit (rounded up to a whole minute, at least one)."""
    minutes = max(1, math.ceil(seconds / 60))
    d, rest = divmod(minutes, 24 * 60)
    h, m = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:00"


def render_script(spec: WorkloadSpec, target: TargetSpec, launch: Launch, settings: dict, threads: int = 1,
                  agent: Agent = AGENTS["torchrun"]) -> str:
    s = settings
    job_name = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{spec.name}-{target.name}")[:64]
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job_name}", f"#SBATCH --nodes={target.nodes}",
             "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --cpus-per-task={int(s.get('cpus_per_task') or max(1, target.devices * threads))}"]
    if s.get("gres"):
        lines.append(f"#SBATCH --gres={s['gres']}")
    elif DEVICES[target.device].adapter == "cuda":
        lines.append(f"#SBATCH --gres=gpu:{target.devices}")
    if s.get("time_limit"):
        lines.append(f"#SBATCH --time={slurm_time(float(s['time_limit']))}")
    for key, flag in (("partition", "partition"), ("account", "account"), ("qos", "qos"),
                      ("constraint", "constraint")):
        if s.get(key):
            lines.append(f"#SBATCH --{flag}={s[key]}")
    if s.get("mem"):
        lines.append(f"#SBATCH --mem={max(1, math.ceil(int(s['mem']) / 2**20))}M")
    lines += ["#SBATCH --output=slurm-%j.out", "#SBATCH --open-mode=append", ""]
    lines += ["set -euo pipefail",
              "# generated by accelctl: the run folder ($SLURM_SUBMIT_DIR) is shared by every node",
              'py="${ACCELCTL_PYTHON:-python3}"']
    lines += [f"export {k}={word(v)}" for k, v in sorted(launch.env.items())]
    lines += ['head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
              "addr=$(scontrol show node \"$head\" -o | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')",
              'addr="${addr:-$head}"',
              ("port=$(\"$py\" -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); "
              "print(s.getsockname()[1])')"),
              'echo "accelctl: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, rendezvous $addr:$port"']
    if launch.cwd:
        if "{optimum_habana}" in launch.cwd:
            lines.append(': "${OPTIMUM_HABANA_DIR:?set OPTIMUM_HABANA_DIR to the optimum-habana checkout}"')
        lines.append("cd " + word(launch.cwd))
    lines += [*agent.lines(launch.argv, target.devices), ""]
    return "\n".join(lines)


class SlurmEngine(Engine):
    name = "slurm"
    summary = "Slurm batch job (sbatch), one launcher agent per node (torchrun c10d, deepspeed --no_ssh)"
    settings = slurm_settings.SETTINGS
    backends = tuple(AGENTS)

    def wrap(self, spec, target, built, job, settings):
        s = dict(settings.settings)
        for key, pattern in PATTERNS.items():
            if s.get(key) is not None and not pattern.fullmatch(str(s[key])):
                raise _refuse(spec, target, key, f"engine slurm {key} {str(s[key])!r} has a character a batch "
                              f"script line cannot take", f"{key} may hold {pattern.pattern}")
        if s.get("container_image"):
            raise _refuse(spec, target, "container_image", "engine slurm container_image is not supported yet",
                          "leave container_image unset; the nodes run the submitter's Python environment")
        agent = AGENTS[job.backend]
        if len(built.launches) != 1:
            raise _refuse(spec, target, "partition", f"engine slurm places one launch per node, backend "
                          f"{job.backend} gave {len(built.launches)}", "")
        (launch,) = built.launches
        env = {k: v for k, v in launch.env.items() if k not in agent.drops_env}
        bad = [k for k in env if not ENV_NAME_RE.fullmatch(k)]
        if bad:
            raise _refuse(spec, target, "partition", f"environment name {bad[0]!r} cannot be exported", "")
        launch = dataclasses.replace(launch, env=env)
        script = render_script(spec, target, launch, s, job.threads, agent)
        request = {"script": SCRIPT, "backend": job.backend, "nodes": target.nodes, "devices": target.devices,
                   "env": env, "cwd": launch.cwd, "args": agent.args(launch.argv)}
        submit = Launch("sbatch", SUBMIT, {}, processes=0, cwd=RUN_DIR)
        files = [f for f in built.files if f.path not in agent.drops_files]
        warnings = [w for w in built.warnings if not any(f"{RUN_DIR}/{d}" in w for d in agent.drops_files)]
        ignored = agent.ignored(spec)
        if ignored:
            warnings.append(f"engine {agent.overridden[0]} {', '.join(ignored)} do(es) not apply under engine slurm: "
                            "the allocation gives the hosts and the master (its first host, a free port there)")
        notes = [*built.notes,
                 (f"Slurm: {target.nodes} node(s) x 1 {agent.what} agent ({target.devices} process(es) each), "
                  "rendezvous on the allocation's first host; the run folder must be shared by the nodes"),
                 (f"submit: {' '.join(SUBMIT)} in the run folder by the run's supervisor, which follows the job "
                  "and scancels it on stop; accelctl cancel RUN from anywhere")]
        return Built([submit], [*files, GeneratedFile(SCRIPT, script, role="Slurm batch script", executable=True)],
                     notes, warnings, request)

    def node_plan(self, plan: Plan) -> Plan:
        """Node 0's launch as the backend check reads it (stand-in address and port), from the
        plan's request: the agent's arguments, the exports and the folder the script was made of."""
        r = plan.request or {}
        launch, extra = AGENTS[r["backend"]].node_launch(list(r["args"]), r["nodes"], r["devices"], dict(r["env"]),
                                                         r["cwd"])
        return dataclasses.replace(plan, launches=(launch,), request=None,
                                   files=tuple(f for f in plan.files if f.path != SCRIPT) + tuple(extra))

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """``sbatch --test-only`` on the rendered script: the controller validates every
        ``#SBATCH`` request (partition, account, nodes, gres, time) and says when it would
        start, without queueing anything.  Not run without sbatch or a reachable controller."""
        import shutil
        import subprocess
        import tempfile

        from accelctl.backends.findings import CheckResult, not_run

        tool = "sbatch --test-only (Slurm controller)"
        if shutil.which("sbatch") is None:
            return [not_run(tool, "sbatch is not installed (Slurm's client)")]
        import os

        conf = os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
        if not os.path.exists(conf):  # sbatch would retry reading it for 60 s
            return [not_run(tool, f"no Slurm configuration ({conf} does not exist)")]
        try:
            ping = subprocess.run(["scontrol", "ping"], check=False, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [not_run(tool, f"scontrol ping: {exc}")]
        if ping.returncode != 0 or " is UP" not in ping.stdout:
            said = (ping.stdout + ping.stderr).strip().splitlines()
            return [not_run(tool, f"no Slurm controller reachable: {said[-1] if said else ping.returncode}")]
        script = next(f.content for f in plan.files if f.path == SCRIPT)
        with tempfile.TemporaryDirectory(prefix="accelctl-sbatch-") as d:
            path = f"{d}/{SCRIPT}"
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(script)
            try:
                r = subprocess.run(["sbatch", "--test-only", path], cwd=d, check=False, capture_output=True,
                                   text=True, timeout=20)
            except subprocess.TimeoutExpired:
                return [not_run(tool, "sbatch --test-only did not answer in 20 s")]
        lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        if r.returncode != 0 and any(s in " ".join(lines) for s in UNREACHABLE):
            return [not_run(tool, f"no Slurm controller reachable: {lines[-1] if lines else r.returncode}")]
        return [CheckResult(tool, r.returncode == 0, lines or [f"exit code {r.returncode}"])]

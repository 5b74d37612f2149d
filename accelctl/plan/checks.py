"""``accelctl plan --check``: a plan checked by the real software it targets.

The same checks the test suite runs, for one plan, wherever the tool is installed:
DeepSpeed's own config classes and launcher parser, torchrun's parser, Transformer
Engine's source, optimum-habana (in its own venv, ``.venv-habana`` or ``$HABANA_VENV``).
A tool that is not installed gives an "unavailable" result with how to get it, never a
pass.  Imports of the tools happen here only, so plain ``accelctl plan`` stays light.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from accelctl.contract.plan import Plan
from accelctl.spec.types import WorkloadSpec

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class CheckResult:
    tool: str
    #: True passed, False rejected, None the tool is not available here
    ok: bool | None
    messages: list[str] = field(default_factory=list)

    def render(self) -> str:
        state = {True: "ok", False: "REJECTED", None: "unavailable"}[self.ok]
        lines = [f"# check: {self.tool}: {state}"]
        lines += [f"#   {m}" for m in self.messages]
        return "\n".join(lines)


def check_torchrun(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    import io
    from contextlib import redirect_stderr

    from torch.distributed.run import get_args_parser

    out = []
    for launch in plan.launches:
        argv = list(launch.argv)
        if "torchrun" not in argv:
            continue
        args = argv[argv.index("torchrun") + 1:]
        err = io.StringIO()
        try:
            with redirect_stderr(err):
                get_args_parser().parse_args(args)
            out.append(CheckResult(f"torchrun parser ({launch.name})", True))
        except SystemExit:
            out.append(CheckResult(f"torchrun parser ({launch.name})", False, err.getvalue().strip().splitlines()[-1:]))
    return out


def check_deepspeed(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    try:
        from accelctl.backends.deepspeed.check import check_plan_with_deepspeed

        diags = check_plan_with_deepspeed(plan, spec)
    except ImportError as exc:
        return [CheckResult("deepspeed", None, [f"{exc}; pip install 'accelctl[deepspeed]'"])]
    errors = [d for d in diags if d.severity == "error"]
    return [CheckResult("deepspeed (DeepSpeedConfig, launcher parser, hostfile)", not errors,
                        [d.render().replace("\n", " | ") for d in diags])]


def check_transformer_engine(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    from accelctl.backends.te_fp8 import check as te_check

    te = te_check.TeSource.locate()
    if te is None:
        return [CheckResult("transformer_engine", None, ["pip install --no-deps transformer-engine==2.20.2"])]
    cfg = json.loads(next(f.content for f in plan.files if f.path == "te_recipe.json"))
    findings = te_check.check_config(cfg, te)
    findings += te_check.check_worker_source(ROOT / "accelctl" / "worker" / "te_layers.py", te)
    return [CheckResult(f"transformer_engine {te.version} source", not findings, [str(f) for f in findings])]


def habana_python() -> Path:
    return Path(os.environ.get("HABANA_VENV", ROOT / ".venv-habana")) / "bin" / "python"


def check_optimum_habana(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    py = habana_python()
    if not py.exists():
        return [CheckResult("optimum-habana", None, [f"no {py}: run scripts/setup-habana.sh"])]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(plan.to_json())
    try:
        cp = subprocess.run([str(py), "-m", "accelctl.backends.gaudi.check", fh.name], capture_output=True,
                            text=True, timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.unlink(fh.name)
    try:
        report = json.loads(cp.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [CheckResult("optimum-habana", False, (cp.stderr.strip().splitlines() or ["no report"])[-3:])]
    tool = f"optimum-habana {report.get('optimum_habana', '')}".strip()
    return [CheckResult(tool, bool(report["passed"]), report["errors"])]


#: backend -> the checks of its plans (backends without real software to ask have none)
CHECKS: dict[str, tuple[Callable[[Plan, WorkloadSpec], list[CheckResult]], ...]] = {
    "torchrun": (check_torchrun,),
    "deepspeed": (check_deepspeed,),
    "deepspeed_inference": (check_deepspeed,),
    "te_fp8": (check_torchrun, check_transformer_engine),
    "xla_neuron": (check_torchrun,),
    "gaudi": (check_optimum_habana,),
}


def check_plan(plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
    """Every check that applies to ``plan``'s backend."""
    spec = spec.for_target(spec.target(plan.target))
    return [r for fn in CHECKS.get(plan.backend, ()) for r in fn(plan, spec)]


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: accelctl plan FILE --check")

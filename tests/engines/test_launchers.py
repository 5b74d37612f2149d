"""The ``python``/``torchrun``/``deepspeed`` -> command mapping is stated once
(``accelctl.contract.launchers``) and every runner of a launch reads it (issue 28)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from accelctl.contract import launchers

ACCELCTL = Path(__file__).resolve().parents[2] / "accelctl"
#: the interpreter arguments only the mapping may spell out
MODULES = ("torch.distributed.run", "deepspeed.launcher.runner")


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_runner_of_a_launch_spells_the_mapping_out_again():
    found = [f"{p.relative_to(ACCELCTL.parent)}:{line}: {text!r}"
             for folder in ("engines", "run") for p in sorted((ACCELCTL / folder).rglob("*.py"))
             for line, text in _strings(p) if any(m in text for m in MODULES)]
    assert found == []


def test_the_four_runners_give_the_same_command_for_each_head():
    from accelctl.engines.kubernetes import HEADS as POD_HEADS
    from accelctl.engines.slurm_agents import AGENTS
    from accelctl.run.supervision.commands import resolve_argv

    for head, args in launchers.HEADS.items():
        assert resolve_argv([head, "x"], Path("/r"), env={}) == [sys.executable, *args, "x"]
        if head in POD_HEADS:
            assert POD_HEADS[head] == ("python", *args)
    assert " ".join(('"$py"', *launchers.HEADS["torchrun"])) in AGENTS["torchrun"].program
    assert " ".join(('"$py"', *launchers.HEADS["deepspeed"])) in AGENTS["deepspeed"].program


def test_a_batch_node_runs_the_mapped_command(tmp_path):
    """The container entrypoint's node, run for real on one "node": its ``python`` head is the
    mapping's interpreter (the child writes the interpreter it runs under)."""
    import json

    from accelctl.engines import batch_entrypoint

    out = tmp_path / "seen"
    code = f"import sys; open({str(out)!r}, 'w').write(sys.executable)"
    env = {"AWS_BATCH_JOB_NODE_INDEX": "0", "AWS_BATCH_JOB_NUM_NODES": "1", "ACCELCTL_RUN_DIR": str(tmp_path),
           batch_entrypoint.NODE_ENV: json.dumps({"argv": ["python", "-c", code], "slots": 1, "files": {},
                                                  "job": {}})}
    assert batch_entrypoint.run_node(env) == 0
    assert out.read_text() == launchers.command("python", sys.executable)[0]

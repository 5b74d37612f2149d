"""``--set`` / ``--over`` name something that exists: a key path naming no target, no block, no
key or a workload is refused in the argument itself (``--set ARG:1:COL: error[CODE]``), the hint
built from the names there are, in the same words by every verb; a sweep's real key whose
values change no row keeps its column and is warned about (W233)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelctl.cli import main

ROOT = Path(__file__).resolve().parents[2]
LLAMA = str(ROOT / "workloads" / "llama2_7b.wl")  # two workloads; targets h100, gaudi2, trn1, cpu
W = "llama2_7b_zero3"


def _verbs(arg: str, runs: Path) -> dict[str, list[str]]:
    """The command line of each verb that takes --set (and sweep's --over), for workload W."""
    return {
        "validate": ["validate", LLAMA, "--set", arg],
        "plan": ["plan", LLAMA, "-w", W, "-t", "cpu", "--set", arg],
        "estimate": ["estimate", LLAMA, "-w", W, "-t", "cpu", "--set", arg],
        "run": ["run", LLAMA, "-w", W, "-t", "cpu", "--runs-dir", str(runs), "--set", arg],
        "sweep": ["sweep", LLAMA, "-w", W, "--over", arg, "--estimate"],
    }


def _diags(argv: list[str], capsys) -> tuple[int, list[dict]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)["diagnostics"]


@pytest.mark.parametrize("arg, code_, column, hint", [
    ("target.h10.devices=4", "E597", 8, "did you mean 'h100'?"),      # no such target: at its name
    ("target.h100=4", "E209", 8, "target.h100.KEY=4"),               # a block where a key is meant
    ("llama2_7b_infer.batch.micro=2", "E202", 1, "-w llama2_7b_infer"),  # a workload's name
    ("target.gpü.devices=4", "E231", 8, "ASCII letters"),            # not a name of the language
    ("target..devices=4", "E231", 8, "no empty part"),               # an empty part: at it
    ("task.objectiv=causal_lm", "E202", 1, "did you mean 'objective'?"),  # a misspelt key of task KIND { }
    ("engine.slurm.partitoin=x", "E202", 1, "did you mean 'partition'?"),  # ... of engine NAME { }
    ("engine.slrum.partition=x", "E202", 8, "did you mean 'slurm'?"),
    ("TARGET.h100.devices=4", "E201", 1, "did you mean 'target'?"),  # names are case-sensitive
])
def test_a_path_naming_nothing_is_refused_in_the_argument_by_every_verb(arg, code_, column, hint, tmp_path, capsys):
    seen = {}
    for verb, argv in _verbs(arg, tmp_path / "runs").items():
        flag = "--over" if verb == "sweep" else "--set"
        code, diags = _diags(argv, capsys)
        ours = [d for d in diags if d["path"] == f"{flag} {arg}"]
        assert code == 1 and ours, (verb, diags)
        d = ours[0]
        assert (d["code"], d["line"], d["column"]) == (code_, 1, column), (verb, d)
        assert hint in d["hint"], (verb, d)
        seen[verb] = d["message"]
    assert not (tmp_path / "runs").exists()  # refused before anything ran
    # one message for each scope: the workload named by -w, or (validate) the file's workloads
    assert len({m for v, m in seen.items() if v != "validate"}) == 1, seen


def test_the_target_choice_and_a_target_the_sweep_leaves_out(capsys):
    code, diags = _diags(["plan", LLAMA, "-w", W, "--set", "target=h100"], capsys)
    assert code == 1 and diags[0]["code"] == "E209" and "-t h100" in diags[0]["hint"]
    code, diags = _diags(["sweep", LLAMA, "-w", W, "--over", "target=h100,gaudy2", "--estimate"], capsys)
    assert code == 1 and (diags[0]["code"], diags[0]["column"]) == ("E597", 13)
    assert diags[0]["hint"] == "did you mean 'gaudi2'?"
    code, diags = _diags(["sweep", LLAMA, "-w", W, "-t", "h100", "--over", "target.cpu.devices=1,2", "--estimate"],
                         capsys)
    assert code == 1 and diags[0]["code"] == "E597" and "(-t h100)" in diags[0]["message"]


def test_a_key_of_another_backend_set_in_every_target_says_how_to_give_it_to_one(capsys):
    code, diags = _diags(["plan", LLAMA, "-w", W, "-t", "gaudi2", "--set", "hpu_graphs=on"], capsys)
    assert code == 1 and {d["code"] for d in diags} == {"E505"} and diags[0]["path"] == "--set hpu_graphs=on"
    assert "--set target.NAME.hpu_graphs=on" in diags[0]["hint"]


def test_the_chosen_workload_is_the_one_a_path_must_name(tmp_path, capsys):
    f = tmp_path / "two.wl"
    body = ('task pretrain { objective = mlm }  model bert(layers = 1, hidden = 32, heads = 2, vocab = 100)  '
            'dataset synthetic(seq_len = 16 tokens)  optimizer adamw(lr = 0.001)  precision fp32  '
            'batch { micro = 2 }  ')
    f.write_text(f"workload alpha {{ {body} target cpu {{ devices = 1 }} target big {{ device = h100 }} }}\n"
                 f"workload beta {{ {body} target cpu {{ devices = 1 }} }}\n")
    assert main(["validate", str(f), "--set", "target.big.devices=2"]) == 0  # alpha has it
    capsys.readouterr()
    code, diags = _diags(["plan", str(f), "-w", "beta", "--set", "target.big.devices=2"], capsys)
    assert code == 1 and diags[0]["message"] == "workload beta has no target 'big' (targets: cpu)"
    # a workload -w does not name: the same E598 and hint in plan and sweep
    for argv in (["plan", str(f), "-w", "alpah", "--set", "batch.micro=4"],
                 ["sweep", str(f), "-w", "alpah", "--over", "batch.micro=2,4", "--estimate"]):
        code, diags = _diags(argv, capsys)
        assert code == 1 and (diags[0]["code"], diags[0]["hint"]) == ("E598", "did you mean 'alpha'?"), argv


def test_an_engine_block_key_is_written_in_the_block_it_names(capsys):
    assert main(["plan", LLAMA, "-w", W, "-t", "h100", "--set", 'engine.slurm.partition="zz"']) == 0
    assert "#SBATCH --partition=zz" in capsys.readouterr().out


def test_a_key_whose_values_change_no_row_keeps_its_column_and_is_warned(capsys):
    argv = ["sweep", LLAMA, "-w", W, "-t", "h100", "--over", "threads=1,2", "--over", "micro=1,2", "--estimate"]
    code, diags = _diags(argv, capsys)
    assert code == 0
    (w,) = diags  # threads (the estimate of an h100 does not read it), not micro (it halves the step)
    assert (w["code"], w["severity"], w["path"], w["column"]) == ("W233", "warning", "--over threads=1,2", 1)
    assert "threads" in w["message"] and "changed nothing" in w["message"]
    assert main([*argv, "--csv"]) == 0
    out, err = capsys.readouterr()
    assert "over.threads" in out.splitlines()[0].split(",")  # the column is kept
    assert "warning[W233]" in err
    # every target: the cpu's estimate reads threads, the accelerators' do not
    code, diags = _diags(["sweep", LLAMA, "-w", "llama2_7b_infer", "--over", "threads=1,2", "--estimate"], capsys)
    assert code == 0 and [d["code"] for d in diags] == ["W233"]
    assert "changed nothing for h100, gaudi2, trn1" in diags[0]["message"] and "cpu differ" in diags[0]["message"]

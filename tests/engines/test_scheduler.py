"""Engines as schedulers (issue 25, item 2), without a cluster: the one state enum against every
state each scheduler documents, the handle's text form, and the request the plan keeps as data
against what the engine renders from it."""

from __future__ import annotations

import gzip
import json
import re
import shlex
from pathlib import Path

import pytest

from accelctl.contract.plan import Plan
from accelctl.engines.scheduler import AppHandle, AppState, scheduler_for
from accelctl.engines.slurm import SCRIPT
from accelctl.engines.slurm_scheduler import STATES as SLURM_STATES

#: squeue(1) "JOB STATE CODES" of Slurm 23.x/24.x, for a machine without the manual page
SQUEUE_STATES = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "CONFIGURING", "COMPLETING", "DEADLINE", "FAILED",
                 "NODE_FAIL", "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "RUNNING", "RESV_DEL_HOLD", "REQUEUE_FED",
                 "REQUEUE_HOLD", "REQUEUED", "RESIZING", "REVOKED", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT",
                 "STOPPED", "SUSPENDED", "TIMEOUT")
MAN_PAGE = Path("/usr/share/man/man1/squeue.1.gz")


def documented_slurm_states() -> list[str]:
    """The states of the installed squeue(1), section JOB STATE CODES (``\\fBCA  CANCELLED\\fR``)."""
    text = gzip.decompress(MAN_PAGE.read_bytes()).decode("utf-8", "replace")
    section = text.split('.SH "JOB STATE CODES"', 1)[1].split(".SH", 1)[0]
    return re.findall(r"^\\fB[A-Z]{1,3}\s+([A-Z_]+)\\fR", section, re.M)


def test_every_state_the_installed_squeue_documents_is_mapped():
    if not MAN_PAGE.exists():
        pytest.skip(f"not run: no {MAN_PAGE} (Slurm's client manual) on this machine")
    states = documented_slurm_states()
    assert len(states) >= 20, states  # the section was found and read
    assert sorted(set(states) - set(SLURM_STATES)) == []


@pytest.mark.parametrize("state", SQUEUE_STATES)
def test_each_slurm_state_maps_to_one_state(state):
    assert SLURM_STATES[state] is not AppState.UNKNOWN
    ended = state in ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                      "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT")
    assert SLURM_STATES[state].terminal is ended  # a job that may still run processes is never "ended"
    assert (SLURM_STATES[state] is AppState.SUCCEEDED) is (state == "COMPLETED")


def test_an_unknown_word_is_unknown_not_a_guess():
    assert scheduler_for("slurm").state_of("SOMETHING_NEW") is AppState.UNKNOWN
    assert not AppState.UNKNOWN.terminal


@pytest.mark.parametrize("text", ["slurm://linux/123", "kubernetes://team-a/bert-x-1a2b3c4d",
                                  "aws_batch://q/0f2f6f4e-6a3e-4b43-9d4b-cc2d3a4b5c6d", "slurm:///12"])
def test_a_handle_reads_back_from_its_text(text):
    assert str(AppHandle.parse(text)) == text


@pytest.mark.parametrize("text", ["", "slurm://x", "123", "slurm://a/b c", "Slurm://a/1"])
def test_a_bad_handle_is_refused(text):
    with pytest.raises(ValueError, match="not a scheduler handle"):
        AppHandle.parse(text)


# ---------------------------------------------------------------- the request as data

def _slurm_plan(backend_block: str = "", target: str = "t"):
    from test_slurm import make_plan

    return make_plan(backend_block, target=target)[1]


def _read_script(script: str) -> dict:
    """The script's exports, ``cd`` and agent arguments, read back with shlex and the script's
    own variables put back as the plan's placeholders (this test's reading, not the engine's)."""
    shell = {'"$SLURM_SUBMIT_DIR"': "{run_dir}", '"$port"': "{free_port}", '"$OPTIMUM_HABANA_DIR"': "{optimum_habana}"}

    def back(word: str) -> str:
        for placeholder_shell, placeholder in shell.items():
            word = word.replace(placeholder_shell.strip('"'), placeholder)
        return word

    lines = script.splitlines()
    env = dict(back(shlex.split(ln[len("export "):])[0]).split("=", 1) for ln in lines if ln.startswith("export "))
    cwd = next((back(shlex.split(ln[3:])[0]) for ln in lines if ln.startswith("cd ")), "")
    args = [back(a) for a in shlex.split(next(ln for ln in reversed(lines) if ln.strip()))]
    nodes = int(re.search(r"--nodes=(\d+)", script)[1])
    return {"env": env, "cwd": cwd, "args": args, "nodes": nodes}


@pytest.mark.parametrize("target", ["t", "g"])
def test_the_batch_script_rendered_from_the_request_reads_back_as_the_request(target):
    p = _slurm_plan(target=target)
    script = next(f.content for f in p.files if f.path == SCRIPT)
    read = _read_script(script)
    assert read == {k: p.request[k] for k in ("env", "cwd", "args", "nodes")}
    assert p.request["args"] and p.request["script"] == SCRIPT


def test_the_request_survives_plan_json():
    p = _slurm_plan()
    again = Plan.from_dict(json.loads(p.to_json()))
    assert again.request == p.request and again == p


def test_a_local_plan_has_no_request_and_plan_json_does_not_name_one():
    from accelctl.api import plan, validate_text

    specs, _ = validate_text("workload w { task pretrain  model gpt2(layers = 1, hidden = 32, heads = 2)  "
                             "dataset synthetic(seq_len = 8)  batch { micro = 1 }  measure { warmup = 0  steps = 1 }  "
                             "target cpu { device = cpu  devices = 1  precision = fp32 } }")
    p = plan(specs[0], "cpu")
    assert p.request is None and "request" not in json.loads(p.to_json())


def test_every_condition_the_training_operators_sdk_names_is_mapped():
    constants = pytest.importorskip("kubeflow.training.constants.constants")
    from accelctl.engines.kubernetes_scheduler import STATES

    assert constants.JOB_CONDITIONS and sorted(set(constants.JOB_CONDITIONS) - set(STATES)) == []
    assert STATES[constants.JOB_CONDITION_SUCCEEDED] is AppState.SUCCEEDED
    assert STATES[constants.JOB_CONDITION_FAILED] is AppState.FAILED
    assert not any(STATES[c].terminal for c in constants.JOB_CONDITIONS
                   if c not in (constants.JOB_CONDITION_SUCCEEDED, constants.JOB_CONDITION_FAILED))


@pytest.mark.parametrize("text,kept", [("slurm://c/12", True), ("nope://a/1", False), ("garbage", False)])
def test_only_a_handle_of_a_known_scheduler_is_asked_about(tmp_path, text, kept):
    from accelctl.contract import scheduler as scheduler_file
    from accelctl.run.store import scheduled_job

    scheduler_file.write(tmp_path, scheduler_file.SchedulerJob("slurm", "12", "RUNNING", handle=text))
    assert (scheduled_job.handle_of(tmp_path) is not None) is kept


def test_a_library_exception_is_quoted_in_one_line_even_without_a_message():
    """``errors.first_line``, the one way schedulers and checks quote a client's exception: the
    first line cut at its limit; an exception without a message gives "" or its repr, never an
    IndexError (``str(exc).splitlines()[0]`` raised one on an empty message)."""
    from accelctl.errors import first_line

    assert first_line(RuntimeError("refused\nTraceback ...\n"), 5) == "refus"
    assert first_line(RuntimeError("")) == ""
    assert first_line(TimeoutError(), 200, None) == "TimeoutError()"
    assert first_line(OSError("\nsecond"), 200) == ""

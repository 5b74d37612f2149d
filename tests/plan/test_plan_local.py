"""Plans for the backends that run here: cpu and torchrun (gloo)."""

from __future__ import annotations

import json
import shlex

import pytest
from reference_hosts import AVX512_BF16, REFERENCE

from accelctl.api import check, parse, plan, render_plan_sh, render_plan_text
from accelctl.contract.plan import Plan
from accelctl.errors import PlanError

WL = """
workload tiny {
  task pretrain
  model bert(layers = 2, hidden = 32, heads = 2)
  batch { micro = 4 }
  measure { warmup = 1  steps = 3 }
  target cpu  { devices = 1 }
  target ddp  { device = cpu  devices = 2 }
  target big  { device = cpu  devices = 2  threads = 3 }
  target bf   { device = cpu  precision = bf16 }
  target hf   { device = cpu  precision = fp16 }
}
"""


def _spec():
    (spec,) = check(parse(WL, "tiny.wl"))
    return spec


def test_cpu_plan_is_one_worker_process():
    p = plan(_spec(), "cpu")
    assert p.backend == "cpu" and p.engine == "local"
    (launch,) = p.launches
    assert launch.argv == ("python", "-m", "accelctl.worker", "{run_dir}/job.json")
    assert launch.env["HF_HUB_OFFLINE"] == "1"
    assert p.job.batch.micro == 4 and p.job.measure.steps == 3 and p.job.task.kind == "pretrain"
    assert p.job.model.family == "bert" and p.job.model.stand_in["hidden"] == 32


def test_two_cpu_devices_plan_torchrun_with_gloo_and_one_thread_per_core():
    p = plan(_spec(), "ddp")
    assert p.backend == "torchrun"
    (launch,) = p.launches
    assert launch.argv[0] == "torchrun" and "--nproc_per_node=2" in launch.argv
    assert p.job.device.comm == "gloo" and p.job.device.adapter == "cpu"
    assert p.job.threads >= 1


def test_torchrun_command_parses_with_torchs_own_parser():
    from torch.distributed.run import get_args_parser

    p = plan(_spec(), "ddp")
    args = get_args_parser().parse_args(list(p.launches[0].argv[1:]))
    assert args.nproc_per_node == "2" and args.standalone and args.module
    assert args.training_script == "accelctl.worker"
    assert args.training_script_args == ["{run_dir}/job.json"]


def test_threads_override():
    assert plan(_spec(), "big").job.threads == 3


def test_bf16_on_cpu_warns_loudly():
    """On a CPU without native bf16 (the host facts given: no skip on an AVX-512 machine)."""
    p = plan(_spec(), "bf", host=REFERENCE)
    assert any("slower than fp32" in w for w in p.warnings)


@pytest.mark.parametrize("host", [REFERENCE, AVX512_BF16], ids=["avx2", "avx512_bf16_fp16"])
def test_16bit_on_cpu_warning_is_one_rule(host):
    """hostinfo.cpu_precision_warning is the rule; the plan applies it with its host's flags
    (no calibration: tests/plan/test_host_facts.py has the measured case), fp16 by the fp16
    instructions (a CPU may have AVX512-BF16 and no AVX512-FP16); both kinds of CPU, on any."""
    from accelctl.hostinfo import cpu_has_native, cpu_precision_warning

    for dtype in ("bf16", "fp16"):
        slow = cpu_precision_warning(dtype, native=False)
        assert f"{dtype} on a CPU without native {dtype}" in slow and "slower than fp32" in slow
        assert cpu_precision_warning(dtype, native=True) is None
    assert cpu_precision_warning("fp32", native=False) is None and cpu_has_native("fp32")
    for target, dtype in (("bf", "bf16"), ("hf", "fp16")):
        warnings = plan(_spec(), target, host=host).warnings
        if host.has_native(dtype):
            assert not any("slower than fp32" in w for w in warnings)
        else:
            assert cpu_precision_warning(dtype, native=False) in warnings


def test_unknown_target_is_a_plan_error():
    with pytest.raises(PlanError, match="no target 'nope'"):
        plan(_spec(), "nope")


def test_plan_round_trips_through_json():
    p = plan(_spec(), "ddp")
    again = Plan.from_dict(json.loads(p.to_json()))
    assert again == p


def test_rendered_plans_quote_every_word():
    text = """
workload q {
  task generate { prompt = "it's \\"quoted\\"; rm -rf / $(id)"  max_new_tokens = 3 }
  model bloom
  target cpu { devices = 1 }
}
"""
    (spec,) = check(parse(text, "q.wl"))
    p = plan(spec, "cpu")
    assert p.job.task.prompt == 'it\'s "quoted"; rm -rf / $(id)'
    sh = render_plan_sh(p)
    # the prompt only travels inside the job file's single-quoted printf word, never on a command line
    for line in sh.splitlines():
        if line.startswith(("HF_HUB", "OMP", "python", "torchrun")) or " python " in line:
            assert "rm -rf" not in line
    assert "<<" not in sh and "printf '%s' '{" in sh  # one single-quoted word: no expansion of $(...)
    for launch in p.launches:
        assert shlex.split(launch.shell())[-len(launch.argv):] == list(launch.argv)
    assert "launch worker" in render_plan_text(p)


def test_target_measure_and_optimizer_override_the_workloads():
    text = """
workload o {
  task pretrain
  model bert(layers = 2, hidden = 32, heads = 2)
  optimizer adamw { lr = 0.0015 }
  measure { warmup = 10  steps = 40 }
  target big   { device = a100  devices = 8  optimizer adamw { lr = 0.003 } }
  target cpu   { devices = 1  measure { warmup = 1  steps = 3 } }
}
"""
    (spec,) = check(parse(text, "o.wl"))
    big, cpu = plan(spec, "big"), plan(spec, "cpu")
    assert big.job.optimizer.lr == 0.003 and big.job.measure.steps == 40
    assert cpu.job.optimizer.lr == 0.0015 and (cpu.job.measure.warmup, cpu.job.measure.steps) == (1, 3)


def test_gradient_checkpointing_in_the_model_block_wins_over_the_workloads():
    text = ("workload w { task finetune  model t5() { gradient_checkpointing = on }  "
            "gradient_checkpointing = off  target cpu { } }")
    (spec,) = check(parse(text, "w.wl"))
    assert spec.target("cpu").gradient_checkpointing is True
    assert plan(spec, "cpu").job.gradient_checkpointing is True

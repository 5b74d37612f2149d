"""Help that explains itself: every option's help text and each verb's examples, and what
a bare ``accelctl`` does (clig.dev: help on no arguments, examples first).

``explain(parser, verb)`` runs on each parser ``accelctl.cli.build_parser`` builds (an
``accelctl.cli.parser.Parser``, which lists its arguments): options registered without
``help=`` get the text of ``SHARED_HELP`` (the same option means the same thing in every verb),
and each verb gets its ``EXAMPLES`` as an epilog.  tests/test_cli_help.py walks every argument
of every verb and fails on one without help.  Imports only the plug-in table.
"""

from __future__ import annotations

import argparse
import sys

from accelctl.language import plugins

#: option or positional dest -> its help where a verb registered it without one
SHARED_HELP = {
    "workload": "only this workload of the file (default: every workload in it)",
    "target": "only this target of the workload (a name from its target blocks; default: each target, or the "
              "first that can run here for run)",
    "engine": "launch through this engine instead of the target's: " + ", ".join(plugins.ENGINES),
    "file": "the workload file (.wl)",
    "files": "workload files (.wl), one or more",
    "format": "output format (default: text)",
    "confidence": "confidence level of the intervals and of the verdict (default 0.95)",
    "runs_dir": "run store (default $ACCELCTL_RUNS_DIR or ./runs)",
    "preflight_timeout": "seconds the preflight may take, queue time included (default 300)",
    "plot": "also draw the scaling curve to this PNG",
    "shell": "the shell to complete in: bash, zsh or fish",
    "cmd": "what to do (accelctl VERB --help: its options and examples)",
}

#: verb -> example command lines, each with what it does
EXAMPLES = {
    None: [("accelctl", "the TUI on a terminal (this help in a pipe)"),
           ("accelctl validate workloads/*.wl", "check workloads, every problem at once"),
           ("accelctl plan workloads/tiny_gpt2.wl -t cpu", "how one target would be launched"),
           ("accelctl run workloads/tiny_gpt2.wl", "run it here, live"),
           ("accelctl runs --since 2d", "the runs of the last two days")],
    "validate": [("accelctl validate workloads/*.wl", "every file, every diagnostic"),
                 ("accelctl validate workloads/tiny_gpt2.wl --json", "the diagnostics as one JSON document")],
    "plan": [("accelctl plan workloads/tiny_gpt2.wl", "every target's plan"),
             ("accelctl plan workloads/llama2_7b.wl -t h100 -f sh", "one target's launch as a shell script"),
             ("accelctl plan workloads/llama2_7b.wl --diff cpu h100", "what changes between two targets")],
    "estimate": [("accelctl estimate workloads/*.wl", "step time, throughput, fit and cost of every target"),
                 ("accelctl estimate workloads/llama2_7b.wl -t h100 --json", "one target, as JSON")],
    "run": [("accelctl run workloads/tiny_gpt2.wl", "the first target that can run here, live in the TUI"),
            ("accelctl run workloads/tiny_gpt2.wl -t cpu --headless", "plain console stream"),
            ("accelctl run workloads/llama2_7b.wl --rehearse", "rehearse an accelerator target on this CPU"),
            ("accelctl run --resume 4f2a", "continue a stopped run from its newest checkpoint"),
            ("accelctl run workloads/ddp_cpu.wl --detach", "run it beyond this terminal; prints its id"),
            ("accelctl run workloads/tiny_gpt2.wl --mlflow --wandb --tensorboard",
             "log live to MLflow ($MLFLOW_TRACKING_URI), W&B offline, TensorBoard")],
    "init": [("accelctl init llama", "a tiny Llama-architecture workload that runs on this CPU"),
             ("accelctl init meta-llama/Llama-2-7b-hf --config config.json -t gaudi2",
              "its real shape from its config.json; sharded to fit where it must be"),
             ("accelctl init bigscience/bloomz-7b1 --task generate -t h100", "greedy generation, one H100")],
    "runs": [("accelctl runs", "every stored run, newest first"),
             ("accelctl runs --status failed --since 12h", "what failed in the last 12 hours"),
             ("accelctl runs -w 'bert*' -t cpu --json", "one workload family on one target, as JSON"),
             ("accelctl runs rm 4f2a 9c1e", "remove two runs (never one in progress)"),
             ("accelctl runs gc --failed --older-than 7d --dry-run", "which failed week-old runs would go")],
    "status": [("accelctl status", "every run in progress: state, step, ETA"),
               ("accelctl status 4f2a --json", "one run's state as JSON")],
    "logs": [("accelctl logs 4f2a -f", "its worker.log, followed until the run ends"),
             ("accelctl logs 4f2a --rank 1", "rank 1's lines only")],
    "attach": [("accelctl attach 4f2a", "its console stream from the start, live until it ends")],
    "cancel": [("accelctl cancel 4f2a", "stop it from any terminal; nothing of it left running")],
    "report": [("accelctl report", "every ok run's step time, throughput and cost"),
               ("accelctl report 4f2a 9c1e -f md", "two runs as a Markdown table"),
               ("accelctl report --reference", "the published figures accelctl reproduces")],
    "compare": [("accelctl compare 4f2a 9c1e", "speed-up of 9c1e over 4f2a with 95% intervals"),
                ("accelctl compare 4f2a 9c1e --fail-on-regression", "exit 3 on a significant regression (CI)")],
    "sweep": [("accelctl sweep workloads/ddp_cpu.wl -t cpu -d 1,2", "scaling efficiency at 1 and 2 devices"),
              ("accelctl sweep workloads/vit_fp8.wl --over precision=bf16,fp8 --estimate",
               "bf16 against fp8 by the estimate")],
    "pick": [("accelctl pick workloads/vit_fp8.wl --work '1e8 samples' --deadline '12 h'",
              "the cheapest machine for the job by then")],
    "fit": [("accelctl fit workloads/t5_3b_summarization.wl -t gaudi2", "the largest micro-batch on Gaudi2")],
    "tui": [("accelctl tui", "the TUI on ./workloads"), ("accelctl tui --view runs", "open on the stored runs")],
    "doctor": [("accelctl doctor", "what this machine can run"),
               ("accelctl doctor --plan workloads/ddp_cpu.wl -t cpu", "a seconds-long preflight of one target")],
    "completion": [('eval "$(accelctl completion bash)"', "completion in this bash session"),
                   ("accelctl completion fish > ~/.config/fish/completions/accelctl.fish", "fish, for good")],
}


def epilog(verb: str | None) -> str | None:
    lines = EXAMPLES.get(verb)
    if not lines:
        return None
    width = max(len(cmd) for cmd, _ in lines)
    if any(4 + width + len(what) > 79 for _, what in lines):  # too wide for 80 columns: two lines each
        return "examples:\n" + "\n".join(f"  {cmd}\n      {what}" for cmd, what in lines)
    return "examples:\n" + "\n".join(f"  {cmd:<{width}}  {what}" for cmd, what in lines)


def explain(parser, verb: str | None = None) -> None:
    """Fill the missing option help of ``parser`` (``verb``'s, None: the top one) from
    ``SHARED_HELP`` and add its examples."""
    for action in parser.arguments:
        if not action.help and action.dest in SHARED_HELP:
            action.help = SHARED_HELP[action.dest]
    if parser.epilog is None and (text := epilog(verb)):
        parser.epilog = text
        parser.formatter_class = argparse.RawDescriptionHelpFormatter


def bare_opens_tui() -> bool:
    """A bare ``accelctl`` opens the TUI when stdin, stdout and stderr are a terminal and
    Textual is installed; otherwise it prints its help."""
    try:
        if not all(s.isatty() for s in (sys.stdin, sys.stdout, sys.stderr)):
            return False
    except (AttributeError, ValueError):
        return False
    from accelctl.cli.common import textual_missing

    return textual_missing() is None

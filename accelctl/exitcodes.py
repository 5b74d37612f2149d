"""The exit statuses of every ``accelctl`` command, named once.

Every verb returns one of these, and ``--json`` documents carry the number and its name
(``exit_code``, ``exit``).  The README's and docs/cli.md's exit-code tables are
``markdown_table()``; a test holds them equal.

``TABLE`` says what each code means (0 ok, 1 failed, 2 usage, 3 gate, 4 no_device, 5 inconclusive,
70 internal, 130 stopped, 141 broken pipe).  The lowest layer: imports nothing.
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
GATE = 3
#: ``compare --fail-on-regression`` found a significant regression (a GATE)
REGRESSION = GATE
#: ``plan --check``: a check could not run and ``--allow-unavailable`` was not given (a GATE)
CHECK_NOT_RUN = GATE
#: ``run`` (and the TUI): the target's devices are not on this machine
NO_DEVICE = 4
#: ``compare --fail-on-regression`` could not decide (fewer than 3 independent runs a side,
#: or no interval): neither a pass (0) nor a regression (3)
INCONCLUSIVE = 5
INTERNAL = 70
STOPPED = 130
BROKEN_PIPE = 141

#: (code, name, meaning) in the order of the documented table
TABLE: tuple[tuple[int, str, str], ...] = (
    (OK, "ok", "done; nothing refused, nothing failed"),
    (FAILED, "failed", "diagnostics: an invalid workload, a target that cannot be planned or has no such name, "
                       "a plan a real tool rejected, a run that failed, a preflight that did not pass, an export "
                       "its store refused or its place cannot take (`report --tensorboard/--mlflow/--wandb`: full, "
                       "read-only, not a folder; one line naming the path and the errno)"),
    (USAGE, "usage", "the command line asks for what cannot be done as asked: a usage error, a missing file "
                     "(`validate` reports one as E001 beside the other files: exit 1), an unknown or ambiguous run "
                     "id, options that do not go together, runs `compare` refuses without `--force` (E226/E227), a run "
                     "another accelctl process runs or resumes (`run --resume`: one owner at a time), a run in progress "
                     "that `runs rm`/`runs gc` keep"),
    (GATE, "gate", "a check asked for on the command line did not pass: `compare --fail-on-regression` found a "
                   "significant regression; `plan --check` could not run a check (its tool is not installed here) "
                   "and `--allow-unavailable` was not given"),
    (NO_DEVICE, "no_device", "`run`: the target's devices are not on this machine and its engine starts the launches "
                             "here; nothing started, no run folder; one line names what is missing, with `accelctl "
                             "doctor` and `--rehearse` as the next steps"),
    (INCONCLUSIVE, "inconclusive", "`compare --fail-on-regression` could not decide: fewer than 3 independent runs "
                                   "a side (`measure { repeat = 3 }`) or no interval; no verdict is printed, and the "
                                   "gate neither passes nor fails"),
    (INTERNAL, "internal", "an unexpected error inside accelctl (a bug; EX_SOFTWARE): the traceback on stderr, "
                           "the error in the `--json` document"),
    (STOPPED, "stopped", "stopped by Ctrl-C or SIGTERM (128 + SIGINT); a run is recorded `stopped`; a foreground "
                         "`run`'s viewer detached by a hang-up (the run goes on)"),
    (BROKEN_PIPE, "broken_pipe", "the reader of stdout went away (`accelctl plan F | head`; 128 + SIGPIPE)"),
)

NAMES = {code: name for code, name, _ in TABLE}


def closed_pipe(exc: BaseException) -> bool:
    """``exc`` says the reader of stdout went away (exit ``BROKEN_PIPE``): a
    ``BrokenPipeError``, or the ``SystemExit`` rich's Console raises while it handles one."""
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, SystemExit)
                                                and isinstance(exc.__context__, BrokenPipeError))


def name(code: int) -> str:
    """The documented name of an exit status ("exit 5" for one outside the table)."""
    return NAMES.get(code, f"exit {code}")


def markdown_table() -> str:
    """The exit-code table as the README and docs/cli.md print it."""
    rows = ["| code | name | meaning |", "|---:|---|---|"]
    rows += [f"| {code} | `{n}` | {meaning.replace('|', chr(92) + '|')} |" for code, n, meaning in TABLE]
    return "\n".join(rows)

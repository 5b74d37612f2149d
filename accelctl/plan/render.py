"""A plan as text: what ``accelctl plan`` prints and the TUI's Plan screen shows.

* ``render_plan_text(plan, width=None)``: the readable form, folded to a terminal's width;
* ``render_plan_sh(plan)``: a POSIX ``sh`` script that writes the files (each one single-quoted
  ``printf`` word) and runs the launches (``$RUN_DIR``, ``$FREE_PORT`` or a free port); what could
  leave its word or line is refused whole (``sh_unsafe``);
* ``render_plan(plan, fmt)``: ``text``, ``json`` or ``sh``;
* ``diff_texts`` / ``plan_diff``: a unified diff of two rendered plans (``plan --diff``, the TUI).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex

from accelctl.contract.placeholders import ENV_PLACEHOLDER_ROLES, fill
from accelctl.contract.plan import ENV_PLACEHOLDERS, FREE_PORT, RUN_DIR, Plan
from accelctl.plan.memory import fmt_params
from accelctl.errors import AccelctlError, PlanError
from accelctl.workload.types import WorkloadSpec
from accelctl.frozen import replace

FORMATS = ("text", "json", "sh")
#: what ``plan --format sh`` runs for ``{free_port}`` (as ``accelctl.run.supervision.commands.free_port``)
FREE_PORT_PY = ('import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); '
                'print(s.getsockname()[1])')


def render_plan_text(plan: Plan, width: int | None = None) -> str:
    """The readable plan.  With ``width`` (the terminal's) the comment lines wrap at spaces
    under ``#     `` and each launch command folds between its words with `` \\``
    line continuations (still one shell command to copy; a word is never cut, so one
    longer than the width stays whole); the generated files print byte for byte, as they
    are written.  ``None``: every line whole (pipes, goldens, the TUI)."""
    def comment(line: str) -> list[str]:
        return _fold_comment(line, width)

    out = [*comment(f"# plan: workload {plan.workload} -> target {plan.target}"),
           *comment(f"#   backend {plan.backend}, engine {plan.engine}, device {plan.device}")]
    if plan.facts is not None and plan.facts.params:
        out += comment(f"#   model: {fmt_params(plan.facts.params)} parameters ({plan.facts.basis} model)")
    for n in plan.notes:
        out += comment(f"#   note: {n}")
    for w in plan.warnings:
        out += comment(f"#   WARNING: {w}")
    for f in plan.files:
        out += ["", *comment(f"# file {{run_dir}}/{f.path}" + (f"  ({f.role})" if f.role else "")), f.content.rstrip()]
    out += ["", "# file {run_dir}/job.json  (the worker's input)", plan.job.to_json()]
    for launch in plan.launches:
        out += ["", *comment(f"# launch {launch.name} ({launch.processes} process(es))"),
                launch.shell() if width is None else fold_command(launch, width)]
    return "\n".join(out)


def _fold_comment(line: str, width: int | None) -> list[str]:
    if width is None or len(line) <= width:
        return [line]
    import textwrap

    return textwrap.wrap(line, width=width, subsequent_indent="#     ", break_long_words=False,
                         break_on_hyphens=False)


def fold_command(launch, width: int) -> str:
    """``launch.shell()`` folded to ``width``: the same quoted words (``cd DIR &&``, the
    environment, the argv), broken between words with `` \\`` + newline + 4 spaces, which
    the shell reads as one line."""
    words = [f"{k}={shlex.quote(v)}" for k, v in sorted(launch.env.items())]
    words += [shlex.quote(a) for a in launch.argv]
    lines = [f"cd {shlex.quote(launch.cwd)} &&"] if launch.cwd else []
    current = ""
    for word in words:
        if current and len(current) + 1 + len(word) + 2 > width:
            lines.append(current)
            current = "    " + word
        elif current:
            current += " " + word
        else:
            current = ("    " if lines else "") + word
    if current:
        lines.append(current)
    return " \\\n".join(lines)


def env_filled(plan: Plan, environ=None) -> tuple[Plan, list[str]]:
    """``plan`` with each environment placeholder (``ENV_PLACEHOLDERS``: ``{optimum_habana}``)
    replaced by its variable's value (the launch's environment over ``environ``, default
    ``os.environ``) in every launch word, environment value, folder and generated file, as the
    runner fills them; and the variables a placeholder still needs (unset here)."""
    import os

    environ = os.environ if environ is None else environ
    missing: list[str] = []

    def fill_env(text: str, env) -> str:
        values = {p: env.get(var) or environ.get(var) or None for p, var in ENV_PLACEHOLDERS.items()}

        def unset(placeholder: str) -> str:
            if ENV_PLACEHOLDERS[placeholder] not in missing:
                missing.append(ENV_PLACEHOLDERS[placeholder])
            return placeholder

        return fill(text, values, unset)  # one pass: a value naming a placeholder is not filled again

    launches = tuple(replace(
        ln, argv=tuple(fill_env(a, ln.env) for a in ln.argv), cwd=fill_env(ln.cwd, ln.env),
        env={k: fill_env(v, ln.env) for k, v in ln.env.items()}) for ln in plan.launches)
    files = tuple(replace(f, content=fill_env(f.content, {})) if f.template else f for f in plan.files)
    return replace(plan, launches=launches, files=files), missing


def printed(plan: Plan) -> Plan:
    """``plan`` as ``accelctl plan`` prints it (text and json): environment placeholders filled
    from this environment, a warning naming each variable that is not set."""

    plan, missing = env_filled(plan)
    return replace(plan, warnings=(*plan.warnings, *map(unset_warning, missing))) if missing else plan


def unset_warning(var: str) -> str:
    placeholder = next(p for p, v in ENV_PLACEHOLDERS.items() if v == var)
    return (f"{placeholder} stands for ${var} ({ENV_PLACEHOLDER_ROLES[placeholder]}), which is "
            f"not set here: set {var} to print the plan with it; `accelctl run` refuses to start without it")


def render_plan_sh(plan: Plan) -> str:
    """The script (module doc); refused whole (``PlanError``) where a value would leave its line
    or its quoting (``sh_unsafe``).  An engine's ``sh_preflight`` lines run before anything is
    written (Kubernetes: ``$run_dir`` on the pods' volume)."""
    bad = sh_unsafe(plan)
    if bad is not None:
        raise PlanError(f"plan -f sh: {bad}; not rendered")
    from accelctl.plan.registry import ENGINES

    engine = ENGINES.get(plan.engine)
    # a file holding the run folder (a scheduler's job.json does) holds it as it is
    written = plan.request is not None or any(RUN_DIR in f.content for f in plan.files)
    out = ["#!/bin/sh", f"# accelctl plan: workload {plan.workload} -> target {plan.target} ({plan.backend})",
           "set -eu", 'run_dir="${RUN_DIR:-$(pwd)/run}"', TRAILING_SLASHES, *([RUN_DIR_GUARD] if written else []),
           *(engine.sh_preflight(plan) if engine else []),
           'mkdir -p "$run_dir/events"', 'export ACCELCTL_EVENTS_DIR="$run_dir/events"']
    plan, missing = env_filled(plan)
    # what is still unset here is the script's to read from its own environment, or to stop on
    out += [f': "${{{var}:?set {var} to the optimum-habana checkout}}"' for var in missing]
    files = [(f.path, f.content, f.template) for f in plan.files]
    if any(FREE_PORT in c for _, c, template in files if template) or any(
            FREE_PORT in ln.shell() for ln in plan.launches):
        out.append('free_port="${FREE_PORT:-$(python3 -c ' + shlex.quote(FREE_PORT_PY) + ')}"')
    executable = {f.path for f in plan.files if f.executable}
    for path, content, template in files:
        out.append(write_file_sh(path, content, template))
        if path in executable:
            out.append(f"chmod +x \"$run_dir\"/{shlex.quote(path)}")
    # last, as the runner writes it (the job wins over a file of its name); a scheduler's job as the
    # runner's: its ranks' stdout is the scheduler's log, the run folder is where their events come back
    out.append(job_sh(plan.job) if plan.request is not None else write_file_sh("job.json", plan.job.to_json()))
    for launch in plan.launches:
        out.append(_fill_placeholders(launch.shell()))
    return "\n".join(out) + "\n"


#: a shell variable name (``NAME=value`` before a command is an assignment only then)
_SH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sh_unsafe(plan: Plan) -> str | None:
    """What of ``plan`` the script could not hold as written, naming it (None: nothing).  Every value
    is one ``shlex.quote``d word, except the comment line's names (must be printable: a newline would
    end the comment) and environment names (must be shell names); a NUL cuts any word; generated
    file names must be printable too.
    """
    for what, text in (("workload name", plan.workload), ("target name", plan.target), ("backend", plan.backend)):
        if not text.isprintable():
            return f"the {what} {text!r} holds {_unprintable(text)}, which its comment line cannot hold"
    for f in plan.files:
        if not f.path.isprintable():
            return f"the generated file name {f.path!r} holds {_unprintable(f.path)}"
    for launch in plan.launches:
        for name in launch.env:
            if not _SH_NAME.fullmatch(name):
                return f"launch {launch.name}'s environment name {name!r} is not a shell variable name"
    return plan.unwritable(nul_only=True)  # a raw NUL in a shell word is cut there


def _unprintable(text: str) -> str:
    """The first character of ``text`` that ``str.isprintable`` refuses, named."""
    import unicodedata

    ch = next(c for c in text if not c.isprintable())
    if unicodedata.category(ch) == "Cc":
        return f"the control character \\x{ord(ch):02x}"
    return f"the character U+{ord(ch):04X} ({unicodedata.name(ch, unicodedata.category(ch))})"


def _fill_placeholders(quoted: str) -> str:
    """``{run_dir}`` and ``{free_port}`` inside single-quoted words -> the shell's values, as
    the runner fills them in (``accelctl.run.store.substitute``): close the quote, the
    variable in double quotes, reopen."""
    shell_values = {RUN_DIR: "'\"$run_dir\"'", FREE_PORT: "'\"$free_port\"'"}
    shell_values.update({p: f"'\"${var}\"'" for p, var in ENV_PLACEHOLDERS.items()})
    return fill(quoted, shell_values)


#: ``$RUN_DIR/`` is the folder ``$RUN_DIR``: its name is the run's id (``${run_dir##*/}``)
TRAILING_SLASHES = 'while [ "$run_dir" != / ] && [ "${run_dir%/}" != "$run_dir" ]; do run_dir="${run_dir%/}"; done'
#: the files the script writes hold the run folder as it is (``{run_dir}``, the job's ``events_dir``):
#: a JSON string, a line of a script or hostfile end at what this refuses
RUN_DIR_GUARD = (r'case "$run_dir" in *[\\\"]*|*[[:cntrl:]]*) printf '
                 + shlex.quote("accelctl plan: the run folder %s holds a backslash, a double quote or a control "
                               "character, which the files it writes do not carry as written: set RUN_DIR\\n")
                 + ' "$run_dir" >&2; exit 1 ;; esac')


def job_sh(job) -> str:
    """The sh line that writes ``job.json`` as the runner does (``store.job_for_run``): ``run_id`` and
    ``events_dir`` (the run folder; empty for launches that run here) are each written as a marker,
    whose JSON string is then replaced by the shell's value in the quoted word.
    """
    import secrets

    marks = {f"accelctl-{secrets.token_hex(16)}": value for value in ('"${run_dir##*/}"', '"$run_dir"')}
    run_id, events_dir = marks
    text = replace(job, run_id=run_id, events_dir=events_dir).to_json()
    quoted = shlex.quote(text)
    for mark, value in marks.items():
        if text.count(mark) != 1:  # a workload string holding a fresh random token: never, but not silently
            raise PlanError(f"plan -f sh: job.json holds {mark} more than once; not rendered")
        quoted = quoted.replace(mark, f"'{value}'")
    return f"printf '%s' {quoted} > \"$run_dir\"/job.json"


def write_file_sh(path: str, content: str, template: bool = False) -> str:
    """The sh line that writes ``content`` byte for byte to ``$run_dir/path``: ``printf '%s'``
    (a builtin of every POSIX shell, so no argument size limit) of one single-quoted word.
    No heredoc: a heredoc ends at a line equal to its delimiter, which a value could hold;
    inside single quotes nothing is special, and shlex.quote closes, escapes and reopens
    around each ``'``.  A ``template``'s ``{run_dir}``/``{free_port}`` are filled in as the runner
    does; other content is data, written as it is."""
    if "\0" in content:
        raise PlanError(f"{path}: a NUL byte cannot travel through a shell word")
    word = shlex.quote(content)
    line = f"printf '%s' {_fill_placeholders(word) if template else word} > \"$run_dir\"/{shlex.quote(path)}"
    folder = path.rpartition("/")[0]
    return f"mkdir -p \"$run_dir\"/{shlex.quote(folder)}\n{line}" if folder else line


def render_plan(plan: Plan, fmt: str = "text", width: int | None = None) -> str:
    """The plan in one of ``FORMATS`` (as ``accelctl plan --format`` prints it, before its newline)."""
    if fmt != "sh":  # sh fills them from its own environment when it runs (render_plan_sh)
        plan = printed(plan)
    if fmt == "json":
        # allow_nan=False: Infinity/NaN are not JSON; the check refuses non-finite numbers,
        # so this only fires on a bug (ValueError), never prints what a JSON reader rejects
        return json.dumps(plan.to_dict(), indent=2, sort_keys=True, allow_nan=False)
    if fmt == "sh":
        return render_plan_sh(plan)
    if fmt == "text":
        return render_plan_text(plan, width)
    raise ValueError(f"unknown plan format {fmt!r} (formats: {', '.join(FORMATS)})")


def refusal_header(workload: str, target: str) -> str:
    """The line that stands for a target's plan when it cannot be planned."""
    return f"# plan: workload {workload} -> target {target}: cannot be planned"


def diff_texts(a_text: str, b_text: str, a_label: str, b_label: str, identical: str) -> str:
    """A unified diff (2 lines of context) of two rendered plans; ``identical`` when they are the same."""
    lines = difflib.unified_diff(a_text.splitlines(), b_text.splitlines(), a_label, b_label, lineterm="", n=2)
    return "\n".join(lines) or identical


def plan_diff(spec: WorkloadSpec, a: str, b: str, engine: str | None = None, width: int | None = None,
              host=None) -> str:
    """What changes between two targets' plans (a refused target counts as its refusal).  With
    ``width`` the plans render one column narrower for the diff's marker and long lines fold under
    it; None: every line whole (a pipe).  ``host``: the ``HostFacts`` both are planned for.
    """
    from accelctl.plan.compile import compile_plan

    inner = None if width is None else max(20, width - 1)
    texts = []
    for name in (a, b):
        try:
            texts.append(render_plan_text(compile_plan(spec, name, engine, host=host), inner))
        except AccelctlError as exc:
            why = "\n\n".join(d.render(inner) for d in exc.diagnostics) if exc.diagnostics else exc.render()
            texts.append(f"{refusal_header(spec.name, name)}\n{why}")
    diff = diff_texts(texts[0], texts[1], f"target {a}", f"target {b}", f"# targets {a} and {b} plan identically")
    return diff if width is None else "\n".join(out for line in diff.splitlines() for out in fold_diff_line(line, width))


def fold_diff_line(line: str, width: int) -> list[str]:
    """One line of a unified diff folded to ``width`` at its spaces, each continuation under the
    same marker (``-``, ``+`` or a space) and 4 more spaces, so the diff still reads as one; a
    word longer than the line stays whole."""
    if len(line) <= width:
        return [line]
    import textwrap

    marker, body = line[:1], line[1:]
    indent = " " * (len(body) - len(body.lstrip(" ")))
    return [marker + part for part in textwrap.wrap(body, width=width - 1, subsequent_indent=indent + "    ",
                                                     break_long_words=False, break_on_hyphens=False)] or [line]

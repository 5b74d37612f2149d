"""Shell completion: ``accelctl completion bash|zsh|fish`` and the hidden ``__complete``.

The scripts are generated from the CLI's own argparse parser (``accelctl.cli.build_parser``),
so a new verb or option completes without touching this file:

* subcommands, and each subcommand's options (``-t``, ``--target``, ...);
* option values by what they name: ``--target``/``-t`` the targets and ``--workload``/``-w``
  the workloads of the workload FILE already on the command line, ``--resume`` (and the
  RUN / A / B positionals of ``report``/``compare``, ``--calibrate``) the run ids of the
  store (``--runs-dir`` on the line, else $ACCELCTL_RUNS_DIR or ./runs) in their short form,
  as the tables show them (bash: the full ids when no short one matches), ``--format`` its
  choices, ``--runs-dir`` folders, anything else a file name; FILE positionals ``.wl`` files.

Names come from ``accelctl __complete targets|workloads FILE`` and ``accelctl __complete
runs [DIR]``, answered in ``main`` before the parser is built: the workload file is read
by the torch-free validator (a file with errors still gives the names it declares, as far
as it parses; an unreadable one gives nothing), run ids are the store's folder names
(no summary is read).  ``__complete`` prints one name per line, never a traceback, and
exits 0.

bash: a ``complete -F`` function reading ``COMP_WORDS``/``COMP_CWORD``; zsh: the same
function through zsh's ``bashcompinit``; fish: ``complete -c accelctl`` lines.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from accelctl.contract.ids import RUN_ID

SHELLS = ("bash", "zsh", "fish")
#: option dest -> what its value names (anything else that takes a value -- a number, an
#: engine, a URI -- completes nothing)
VALUE_KINDS = {"target": "targets", "diff": "targets", "workload": "workloads", "resume": "runs",
               "calibrate": "runs", "runs_dir": "dirs", "wandb_dir": "dirs", "tensorboard": "dirs",
               "output": "file", "plot": "file", "plan": "wl"}
#: positional dest -> what it names
POSITIONAL_KINDS = {"file": "wl", "files": "wl", "runs": "runs", "run": "runs", "a": "runs", "b": "runs"}
#: the store's run folder names (as accelctl.run.store names them)
_RUN_ID = RUN_ID


# ---------------------------------------------------------------------------- __complete


def complete(argv: Sequence[str], out=None) -> int:
    """``accelctl __complete targets|workloads FILE`` / ``runs [DIR]`` (short run ids) /
    ``run-ids [DIR]`` (full ones, the fallback when no short one matches): names, one a line."""
    import sys

    out = out or sys.stdout
    try:
        kind, rest = (argv[0], list(argv[1:])) if argv else ("", [])
        names = (_file_names(kind, rest[0]) if kind in ("targets", "workloads") and rest
                 else _short_run_ids(rest[0] if rest else None) if kind == "runs"
                 else _run_ids(rest[0] if rest else None) if kind == "run-ids" else [])
    except Exception:  # noqa: BLE001 -- a completion must never print a traceback into a prompt
        names = []
    for name in names:
        print(name, file=out)
    return 0


def _file_names(kind: str, path: str) -> list[str]:
    """The workloads of ``path``, or the targets of every workload in it (first seen order);
    nothing when it cannot be read (``read_source``: never a FIFO or a device, bounded)."""
    from accelctl.api import read_source, validate_text
    from accelctl.errors import WorkloadError

    try:
        text = read_source(path)
    except WorkloadError:
        return []
    specs, _ = validate_text(text, path, cached=True)  # the file as read: its parse may come from the cache
    if not specs:  # errors: the names the file declares, as far as it parses
        return _parsed_names(text, path, kind)
    if kind == "workloads":
        return [s.name for s in specs]
    return list(dict.fromkeys(t.name for s in specs for t in s.targets))


def _parsed_names(text: str, path: str, kind: str) -> list[str]:
    """Names from the syntax tree of a file that parses but does not check."""
    from accelctl.dsl import ast
    from accelctl.dsl.parser import parse

    try:
        tree = parse(text, path)
    except Exception:  # noqa: BLE001 -- a syntax error: nothing to offer
        return []
    names: list[str] = []
    for wl in tree.workloads:
        if kind == "workloads":
            names.append(wl.name)
            continue
        names += [ast.value_text(b.header).strip('"') for b in wl.items
                  if isinstance(b, ast.Block) and b.kind == "target" and b.header is not None]
    return list(dict.fromkeys(n for n in names if n))


def _run_ids(runs_dir: str | None) -> list[str]:
    """The store's run ids, newest first (the folder names; nothing is read)."""
    root = Path(runs_dir or os.environ.get("ACCELCTL_RUNS_DIR") or "runs")
    try:
        names = [e.name for e in os.scandir(root) if e.is_dir() and _RUN_ID.match(e.name)]
    except OSError:
        return []
    return sorted(names, reverse=True)


def _short_run_ids(runs_dir: str | None) -> list[str]:
    """The store's run ids as ``runs`` and ``report`` show them: each one's shortest unique
    tail (``0001``), newest first; the store resolves them."""
    from accelctl.report.width import short_ids

    ids = _run_ids(runs_dir)
    return list(short_ids(ids).values())


# ---------------------------------------------------------------------------- the CLI's shape


def _shape(parser) -> dict[str, dict]:
    """{subcommand: {"options": [...], "values": {option: kind or [choices]}, "positional":
    [kind, ...]}} from the parser (hidden subcommands -- help=SUPPRESS -- left out)."""
    shape = {}
    for name, p in parser.verbs.items():
        if parser.verb_help[name] in (None, argparse.SUPPRESS):  # not in the verb list
            continue
        options, values, positional = [], {}, []
        for a in p.arguments:
            if "--help" in a.option_strings or a.help == argparse.SUPPRESS:
                options += list(a.option_strings) if "--help" in a.option_strings else []
                continue
            if not a.option_strings:
                positional.append(list(a.choices) if a.choices else POSITIONAL_KINDS.get(a.dest, "file"))
                continue
            options += a.option_strings
            if a.nargs != 0:
                kind = list(a.choices) if a.choices else VALUE_KINDS.get(a.dest, "none")
                for o in a.option_strings:
                    values[o] = kind
        shape[name] = {"options": options, "values": values, "positional": positional}
    return shape


# ---------------------------------------------------------------------------- scripts


def script(shell: str, parser) -> str:
    if shell == "fish":
        return _fish(_shape(parser))
    text = _bash(_shape(parser))
    if shell == "zsh":
        return ("#compdef accelctl\n# accelctl completion zsh: the bash completion through zsh's bashcompinit\n"
                "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n" + text)
    return text


def _bash(shape: dict[str, dict]) -> str:
    subs = " ".join(shape)
    opts, vals, pos = [], [], []
    for name, s in shape.items():
        opts.append(f"        {name}) opts={shlex.quote(' '.join(s['options']))} ;;")
        for o, kind in s["values"].items():
            vals.append(f"        {name}:{o}) kind={shlex.quote(_bash_kind(kind))} ;;")
        pos.append(f"        {name}) kinds={shlex.quote(' '.join(_bash_kind(k) for k in s['positional']))} ;;")
    takes = " ".join(sorted({f"{name}:{o}" for name, s in shape.items() for o in s["values"]}))
    return f"""# accelctl completion bash: source it (or put it in bash-completion's completions folder)
_accelctl_complete_names() {{
    # names from the workload FILE or the run store, via the hidden fast subcommand
    local IFS=$'\\n'
    COMPREPLY+=( $(compgen -W "$(command accelctl __complete "$@" 2>/dev/null)" -- "$cur") )
}}

_accelctl() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" sub="" file="" runs_dir="" i w kind kinds opts
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    COMPREPLY=()
    local takes=" {takes} "
    # the subcommand, the workload FILE (its first positional) and --runs-dir, wherever they are
    local npos=0 skip=0 cur_pos=-1
    for (( i = 1; i < ${{#COMP_WORDS[@]}}; i++ )); do
        w="${{COMP_WORDS[i]}}"
        if (( skip )); then
            skip=0
            [[ ${{COMP_WORDS[i-1]}} == --runs-dir ]] && runs_dir="$w"
            [[ ${{COMP_WORDS[i-1]}} == --plan && $i -ne $COMP_CWORD ]] && file="$w"  # doctor --plan FILE
            continue
        fi
        if [[ -z $sub ]]; then
            [[ $w != -* && $i -ne $COMP_CWORD ]] && sub="$w"
            continue
        fi
        if [[ $w == -* ]]; then
            [[ $w == --runs-dir=* ]] && runs_dir="${{w#--runs-dir=}}"
            [[ $w != *=* && $takes == *" $sub:$w "* ]] && skip=1
            continue
        fi
        (( i == COMP_CWORD )) && cur_pos=$npos
        [[ $npos -eq 0 && $i -ne $COMP_CWORD && -z $file ]] && file="$w"
        npos=$(( npos + 1 ))
    done
    if [[ -z $sub ]]; then
        COMPREPLY=( $(compgen -W "{subs} --help --version" -- "$cur") )
        return 0
    fi
    kind=""
    if [[ $prev == -* && $takes == *" $sub:$prev "* ]]; then
        case "$sub:$prev" in
{chr(10).join(vals)}
        esac
    elif [[ $cur == -* ]]; then
        case "$sub" in
{chr(10).join(opts)}
        esac
        COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
        return 0
    else
        case "$sub" in
{chr(10).join(pos)}
        esac
        local -a ks=( $kinds )
        (( cur_pos < 0 )) && cur_pos=$npos
        kind="${{ks[cur_pos]:-${{ks[${{#ks[@]}}-1]}}}}"
    fi
    case "$kind" in
        targets|workloads) [[ -n $file ]] && _accelctl_complete_names "$kind" "$file" ;;
        runs) _accelctl_complete_names runs ${{runs_dir:+"$runs_dir"}}  # short ids, as tables show them
              (( ${{#COMPREPLY[@]}} )) || _accelctl_complete_names run-ids ${{runs_dir:+"$runs_dir"}} ;;
        dirs) COMPREPLY=( $(compgen -d -- "$cur") ) ;;
        none) ;;
        wl) COMPREPLY=( $(compgen -f -X '!*.wl' -- "$cur") $(compgen -d -S / -- "$cur") ); compopt -o nospace 2>/dev/null ;;
        choices:*) kind="${{kind#choices:}}"; COMPREPLY=( $(compgen -W "${{kind//,/ }}" -- "$cur") ) ;;
        *) COMPREPLY=( $(compgen -f -- "$cur") ) ;;
    esac
    return 0
}}
complete -F _accelctl accelctl
"""


def _bash_kind(kind) -> str:
    """A kind as one bash word: ``choices:a,b,c`` for a list of choices."""
    return "choices:" + ",".join(map(str, kind)) if isinstance(kind, list) else kind


def _fish(shape: dict[str, dict]) -> str:
    subs = " ".join(shape)
    lines = ["# accelctl completion fish: source it, or save it as ~/.config/fish/completions/accelctl.fish",
             "function __accelctl_file --description 'the workload FILE on the command line'",
             "    set -l tokens (commandline -opc)",
             "    for t in $tokens[3..-1]",
             "        if not string match -q -- '-*' $t; and test -f $t",
             "            echo $t",
             "            return",
             "        end",
             "    end",
             "end",
             "function __accelctl_runs_dir",
             "    set -l tokens (commandline -opc)",
             "    set -l i (contains -i -- --runs-dir $tokens)",
             "    and echo $tokens[(math $i + 1)]",
             "end",
             "complete -c accelctl -f",
             f"complete -c accelctl -n 'not __fish_seen_subcommand_from {subs}' -a {shlex.quote(subs)}"]
    for name, s in shape.items():
        seen = f"__fish_seen_subcommand_from {name}"
        for o in s["options"]:
            if o in ("-h", "--help"):
                continue
            flag = f"-l {o[2:]}" if o.startswith("--") else f"-s {o[1:]}"
            kind = s["values"].get(o)
            if kind is None:
                lines.append(f"complete -c accelctl -n {shlex.quote(seen)} {flag}")
                continue
            lines.append(f"complete -c accelctl -n {shlex.quote(seen)} {flag} {_fish_values(kind)}")
        kinds = s["positional"]
        if kinds:
            lines.append(f"complete -c accelctl -n {shlex.quote(seen)} {_fish_values(kinds[0], positional=True)}")
    return "\n".join(lines) + "\n"


def _fish_values(kind, positional: bool = False) -> str:
    if isinstance(kind, list):
        return "-x -a " + shlex.quote(" ".join(map(str, kind)))
    if kind in ("targets", "workloads"):
        return f"-x -a '(accelctl __complete {kind} (__accelctl_file))'"
    if kind == "runs":
        return "-x -a '(accelctl __complete runs (__accelctl_runs_dir))'"
    if kind == "dirs":
        return "-x -a '(__fish_complete_directories)'"
    if kind in ("wl", "file"):
        return "-F" if positional else "-r -F"
    return "-x"

"""The command line's parser: argparse through its public API, keeping its own record of what
was added to it (``arguments``, ``verbs``) for the help filler, the completion scripts and the
run's supervisor, which argparse itself offers no public way to list.

Usage errors raise ``UsageError`` instead of exiting (``accelctl.cli.main`` prints them as
argparse does, or puts them in the JSON document of a ``--json`` command line), and help or
version text written to a closed stdout is a ``BrokenPipeError`` (``main`` ends it with exit
141 as every verb; argparse would exit 0).  Imports nothing heavy.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from accelctl.reply import UsageError


class Parser(argparse.ArgumentParser):
    """argparse's parser that records its arguments and verbs; its verbs' parsers are Parsers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: every argument added, in order (``--help`` first where the parser has it)
        self.arguments: list[argparse.Action] = []
        #: verb -> its parser, and verb -> its line in the verb list (``add_subparsers``)
        self.verbs: dict[str, Parser] = {}
        self.verb_help: dict[str, str | None] = {}
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.arguments.append(action)
        return action

    def add_mutually_exclusive_group(self, **kwargs: Any) -> "_Group":
        return _Group(super().add_mutually_exclusive_group(**kwargs), self)

    def add_subparsers(self, helps: dict[str, str] | None = None, **kwargs: Any) -> "Verbs":
        """As argparse's; ``helps``: each verb's line in the verb list where ``add_parser`` gives none."""
        return Verbs(super().add_subparsers(**kwargs), self, helps or {})

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message, self.format_usage(), self.prog)

    def print_usage(self, file=None) -> None:
        write(self.format_usage(), file or sys.stdout)

    def print_help(self, file=None) -> None:
        write(self.format_help(), file or sys.stdout)

    def exit(self, status: int = 0, message: str | None = None):  # type: ignore[override]
        if message:
            write(message, sys.stderr)
        sys.exit(status)


class Verbs:
    """What ``Parser.add_subparsers`` gives: ``add_parser`` as argparse's, each verb recorded."""

    def __init__(self, action: Any, parent: Parser, helps: dict[str, str]) -> None:
        self._action, self._parent, self._helps = action, parent, helps

    def add_parser(self, name: str, **kwargs: Any) -> Parser:
        if "help" not in kwargs and name in self._helps:
            kwargs["help"] = self._helps[name]
        parser = self._action.add_parser(name, **kwargs)
        self._parent.verbs[name] = parser
        self._parent.verb_help[name] = kwargs.get("help")
        return parser


class _Group:
    """A mutually exclusive group whose arguments its parser records."""

    def __init__(self, group: Any, parser: Parser) -> None:
        self._group, self._parser = group, parser

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = self._group.add_argument(*args, **kwargs)
        self._parser.arguments.append(action)
        return action


class Version(argparse.Action):
    """``--version``: the version on stdout, then exit 0 (argparse's own writes through a private
    method of the parser)."""

    def __init__(self, option_strings: list[str], version: str, dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str = "show the version and exit") -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.version = version

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        write(self.version + "\n", sys.stdout)
        parser.exit()


def write(text: str, stream) -> None:
    """As argparse writes help: a stream that cannot take it is skipped, a closed pipe is not."""
    try:
        stream.write(text)
    except BrokenPipeError:
        raise
    except (AttributeError, OSError):
        pass

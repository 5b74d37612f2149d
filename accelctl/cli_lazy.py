"""argparse subcommands built when first looked up: ``accelctl validate`` builds ``validate``'s
parser alone, not the other 17 verbs' (building all of them was ~33 M instructions of a
cold command, importing their modules ~18 M more).

``LazySubParsers`` is the ``add_subparsers`` action of ``accelctl.cli.build_parser``: ``declare``
names a verb and the function that adds its parser (``sub.add_parser(verb, help=...)``, as
before); parsing looks up only the verb the command line names, and anything that walks every
verb (``--help``'s list of verbs and their help lines, completion, ``choices.items()``) builds
each as it reaches it.  The verbs keep their declared order.  Imports nothing heavy.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterator, MutableMapping


class LazySubParsers(argparse._SubParsersAction):
    """``add_subparsers(action=LazySubParsers, ...)``: its verbs are ``declare``d, each parser
    built on first look-up; ``built(parser, verb)`` runs on each as it is built."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._name_parser_map = self.choices = _Verbs()
        self._help_of: dict[str, _VerbHelp] = {}
        self.built: Callable[[argparse.ArgumentParser, str], None] = lambda parser, verb: None

    def declare(self, verb: str, adds: str) -> None:
        """``verb``'s parser is added by ``adds`` (``"module:function"``, called with this action)
        when the verb is first looked up; its help line is listed at once, read then."""
        self._help_of[verb] = _VerbHelp(verb, self.choices)
        self._choices_actions.append(self._help_of[verb])
        self.choices.order.append(verb)
        self.choices.pending[verb] = lambda: self._build(verb, adds)

    def add_parser(self, name, **kwargs):
        """As argparse's; a declared verb's help line goes to the line ``declare`` listed."""
        if name in self._help_of:
            self._help_of[name].help = kwargs.pop("help", None)
        return super().add_parser(name, **kwargs)

    def _build(self, verb: str, adds: str) -> None:
        module, function = adds.split(":")
        getattr(importlib.import_module(module), function)(self)
        if verb not in self.choices.parsers:
            raise RuntimeError(f"{adds} did not add the parser of {verb!r}")  # a bug in the verb table
        self.built(self.choices.parsers[verb], verb)


class _Verbs(MutableMapping):
    """verb -> its parser, built (``pending``: verb -> build) on first look-up; in declared order."""

    def __init__(self):
        self.order: list[str] = []
        self.parsers: dict[str, argparse.ArgumentParser] = {}
        self.pending: dict[str, Callable[[], None]] = {}

    def __getitem__(self, verb: str) -> argparse.ArgumentParser:
        if verb in self.pending:
            self.pending.pop(verb)()
        return self.parsers[verb]

    def __setitem__(self, verb: str, parser: argparse.ArgumentParser) -> None:
        if verb not in self.order:
            self.order.append(verb)
        self.parsers[verb] = parser

    def __delitem__(self, verb: str) -> None:
        self.order.remove(verb)
        self.parsers.pop(verb, None)
        self.pending.pop(verb, None)

    def __contains__(self, verb) -> bool:
        return verb in self.parsers or verb in self.pending

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.order))

    def __len__(self) -> int:
        return len(self.order)


class _VerbHelp(argparse._SubParsersAction._ChoicesPseudoAction):
    """A verb's line in ``accelctl --help``: its help text, read by building the verb when asked."""

    def __init__(self, verb: str, verbs: _Verbs):
        self._verbs, self._help = verbs, None
        super().__init__(verb, (), None)

    @property
    def help(self):
        if self._help is None and self.dest in self._verbs.pending:
            self._verbs[self.dest]  # adding its parser sets the help line
        return self._help

    @help.setter
    def help(self, text) -> None:
        self._help = text

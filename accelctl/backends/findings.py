"""What checking a plan against a vendor's real software gives back.

``Finding``: one problem found in a vendor's source (``te_fp8.check``, ``xla_neuron.check``).
``CheckResult``: the outcome of one real tool asked about one plan (``Backend.check``,
``accelctl plan --check``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelctl.frozen import Value


class Finding(Value):
    #: what was checked: "te_recipe.json: recipe", "te_layers.py:57" ...
    subject: str
    message: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}"


@dataclass
class CheckResult:
    tool: str
    #: True passed, False rejected, None the check did not run (the tool is not available here)
    ok: bool | None
    messages: list[str] = field(default_factory=list)
    #: the target's stack pins (package names) this check ran against, in a side environment
    pins: tuple[str, ...] = ()

    def render(self, width: int | None = None) -> str:
        """``# check: TOOL: ok|REJECTED|NOT RUN``, then one ``#   `` line per message; with
        ``width`` (a terminal's) each line wraps at its spaces under ``#     `` (as the plan's
        comments do; a word is never cut); None: whole lines (a pipe)."""
        state = {True: "ok", False: "REJECTED", None: "NOT RUN (unavailable here)"}[self.ok]
        lines = [f"# check: {self.tool}: {state}"]
        lines += [f"#   {m}" for m in self.messages]
        if width is None:
            return "\n".join(lines)
        import textwrap

        return "\n".join(part for line in lines for part in (
            [line] if len(line) <= width else textwrap.wrap(line, width=width, subsequent_indent="#     ",
                                                             break_long_words=False, break_on_hyphens=False)))


def not_run(tool: str, why: str) -> CheckResult:
    """A check that could not run: reported as such, never as a pass."""
    return CheckResult(tool, None, [why])

"""A plan's placeholders, filled only where the plan put them.

Launch words, environment values, working folders and generated files marked ``template`` may
hold ``{run_dir}``, ``{free_port}`` and ``{optimum_habana}``.  Every filler (the runner,
``plan -f sh``, the engines' scripts) uses ``fill``: one pass, so a value holding another
placeholder's name is never filled again.  Data is never a template: the worker's job, and a
generated file whose ``template`` is off (a job or a request as planned), reach their reader as
written, so a prompt's ``{run_dir}`` stays a prompt.  Workload text reaches a template only as a
vendor script's argument, where a placeholder is refused at its line (``placeholder_in``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

RUN_DIR = "{run_dir}"
#: one free TCP port per run, picked by the runner on 127.0.0.1 when it materialises the plan
#: (the same value in every launch and file of that run): a plan is printed before it runs, so
#: it cannot know a port that is free then; ``accelctl plan --format sh`` picks one in the script
FREE_PORT = "{free_port}"
#: the optimum-habana checkout a vendor example runs from (``$OPTIMUM_HABANA_DIR``)
OPTIMUM_HABANA = "{optimum_habana}"
#: the optimum-neuron checkout whose examples a Neuron optimum-neuron plan runs (``$OPTIMUM_NEURON_DIR``)
OPTIMUM_NEURON = "{optimum_neuron}"
PLACEHOLDERS = (RUN_DIR, FREE_PORT, OPTIMUM_HABANA, OPTIMUM_NEURON)
#: placeholders whose value comes from the environment of the run (``accelctl.run.supervision.commands``)
#: and of ``accelctl plan`` (every format: ``accelctl.plan.render``): the placeholder -> the variable
ENV_PLACEHOLDERS = {OPTIMUM_HABANA: "OPTIMUM_HABANA_DIR", OPTIMUM_NEURON: "OPTIMUM_NEURON_DIR"}
#: what each of them stands for, in the words of the warning when it is not set
ENV_PLACEHOLDER_ROLES = {OPTIMUM_HABANA: "the optimum-habana checkout the example commands run in",
                         OPTIMUM_NEURON: "the optimum-neuron checkout whose examples/ the Neuron commands run"}
PATTERN = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))


def fill(text: str, values: Mapping[str, str | None], missing: Callable[[str], str] | None = None) -> str:
    """``text`` with each placeholder of ``values`` replaced by its value, in one pass; a
    placeholder not in ``values`` stays as written; one whose value is None is ``missing(p)``
    (which raises), or stays."""
    def one(m: re.Match) -> str:
        p = m.group(0)
        if p not in values:
            return p
        value = values[p]
        if value is None:
            return missing(p) if missing is not None else p
        return value

    return PATTERN.sub(one, text) if "{" in text else text


def placeholder_in(text: str) -> str | None:
    """The first placeholder ``text`` holds (None: none)."""
    m = PATTERN.search(text)
    return None if m is None else m.group(0)


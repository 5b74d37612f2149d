"""Each seed workload is the seed's experiment as run: every fact of ``seed_facts.txt``
(model, initialisation, data shape, optimizer, clipping, batch per target, loader,
warm-up and counted steps), read from the shipped file -- and from its plan where the fact
is what runs (a pre-training target's initial weights) -- equals the seed's.  Each fact
cites the seed line it comes from; the test id names it."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from accelctl import api
from tests.language.seed_facts import SEED_FACTS, Fact

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parents[0] / "shared" / "seeds"


@functools.lru_cache(maxsize=None)
def _specs(file: str):
    return {s.name: s for s in api.load(ROOT / "workloads" / file)}


def _read(obj, path: str):
    for part in path.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def _value(fact: Fact, target: str | None):
    spec = _specs(fact.file)[fact.workload]
    head, _, rest = fact.where.partition(".")
    if target is None:
        return _read(spec, fact.where)
    t = spec.target(target)
    if head == "target":
        return _read(t, rest)
    if head == "measure":
        return _read(t.measure or spec.measure, rest)
    if head == "optimizer":
        return _read(t.optimizer or spec.optimizer, rest)
    if head == "plan":
        return _read(api.plan(spec, t), rest)
    return _read(spec, fact.where)


def _cases(seed: str):
    for f in SEED_FACTS[seed]:
        for target in f.targets or (None,):
            yield pytest.param(f, target, id=f"seed{seed}-{f.workload}.{target or '*'}.{f.where}"
                                             f"[{f.line}]")


@pytest.mark.parametrize("seed", sorted(SEED_FACTS))
def test_every_seed_has_facts_with_lines(seed):
    facts = SEED_FACTS[seed]
    assert len(facts) >= 20
    for f in facts:
        assert re.fullmatch(rf"{seed}:\d+(\+(schmid|original-sd|original-t5|habana-ref|bloom-gpu))?", f.line), f


@pytest.mark.parametrize("fact,target", [c for seed in sorted(SEED_FACTS) for c in _cases(seed)])
def test_seed_workloads_are_the_run(fact, target):
    """One case per fact and target, its id led by the seed ("seed000-..."): run one seed's
    with ``-k seed002``."""
    assert _value(fact, target) == fact.value, fact


@pytest.mark.parametrize("seed", sorted(SEED_FACTS))
def test_each_workload_comment_cites_the_seed_lines_of_its_facts(seed):
    """The workload file says where each fact comes from: every seed line of the table
    appears in its file's comments ("000:29")."""
    for f in SEED_FACTS[seed]:
        line = f.line.split("+")[0]
        text = (ROOT / "workloads" / f.file).read_text()
        first = int(re.search(r":(\d+)", line).group(1))
        cited = {int(m) for a, b in re.findall(rf"{seed}:(\d+)(?:-(\d+))?", text)
                 for m in range(int(a), int(b or a) + 1)}
        assert first in cited, f"{f.file} does not cite {line} ({f.where})"


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seeds are not beside this checkout")
@pytest.mark.parametrize("needle,seed_line", [
    ("num_workers=12, pin_memory=True", "002:31"), ("if step > 10", "002:31"), ("if step > 50", "002:31"),
    ("batch_size = 64", "002:31"), ("lr=0.001, momentum=0.9", "002:31"),
    ("if idx > 10", "004:29"), ("if idx > 500", "004:29"), ("enumerate(data_loader, start=1)", "004:29"),
    ("batch_size=16", "004:29"), ("XLA_USE_BF16", "004:29"),
    ("DeepSpeed is a machine learning framework", "003:19"),
])
def test_the_cited_seed_lines_say_it(needle, seed_line):
    """Where the table reads a seed's code, the line it cites holds that code."""
    seed, n = seed_line.split(":")
    path = next(SEEDS.glob(f"{seed}_*.txt"))
    assert needle in path.read_text(encoding="utf-8").splitlines()[int(n) - 1]

"""The suite's scheduling under ``-n 2 --dist loadgroup`` (tests/conftest.py): the list of
the longest tests names tests that exist (a renamed or removed one would drop silently to the
end of the queue, where one long test keeps one xdist worker busy while the other has nothing
left), and the xdist groups join exactly the tests that share a fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def suite(pytestconfig):
    """tests/conftest.py as pytest loaded it (each test folder has a ``conftest`` module)."""
    return pytestconfig.pluginmanager.get_plugin(str(ROOT / "tests" / "conftest.py"))


def test_every_longest_entry_names_an_existing_test(suite):
    for entry in suite.LONGEST:
        file, _, name = entry.partition("::")
        path = ROOT / file
        assert path.is_file(), entry
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", path.read_text(encoding="utf-8"), re.M), entry


def test_tests_sharing_a_fixture_share_a_group_and_the_others_do_not(suite):
    m, n = "tests/a/test_m.py", "tests/a/test_n.py"
    groups = suite.shared_groups({
        f"{m}::t1": ("module", ("shipped",)), f"{m}::t2": ("module", ("ragged",)),
        f"{m}::t3": ("module", ("spec",)), f"{m}::t4": ("module", ("table", "spec")), f"{m}::t5": ("module", ("table",)),
        f"{n}::t1": ("module", ("shipped",)), f"{n}::t2": ("session", ("slurm_cluster",)),
        f"{m}::t6": ("session", ("slurm_cluster",)), f"{m}::t7": None})
    # two runs of one module that no test shares: two groups, free to go to two workers
    assert groups[f"{m}::t1"] == f"{m}::shipped" and groups[f"{m}::t2"] == f"{m}::ragged"
    # spec and table meet in t4: t3, t4 and t5 set both up once, on one worker
    assert groups[f"{m}::t3"] == groups[f"{m}::t4"] == groups[f"{m}::t5"] == f"{m}::spec+table"
    # a module fixture is per module: another module's ``shipped`` is its own
    assert groups[f"{n}::t1"] == f"{n}::shipped"
    # the session's cluster: one group across modules
    assert groups[f"{n}::t2"] == groups[f"{m}::t6"] == "slurm_cluster"
    assert f"{m}::t7" not in groups

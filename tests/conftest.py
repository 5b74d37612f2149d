"""Shared by every test folder: the suite's processes start with SIGINT at its default.

Several tests press Ctrl-C on the CLI (SIGINT to a child process) and expect a stop.  A shell
without job control starts a background command (``cmd &``) with SIGINT ignored; Python then
installs no KeyboardInterrupt handler, and an ignored signal stays ignored across ``exec``, so
every ``accelctl run`` the tests started ignored their Ctrl-C and ran to its end (seen: a suite
started as ``(cmd &)`` failed three such tests, which pass with SIGINT at its default).  Here
pytest's own process gets Python's handler back, and its children start with the default."""

import itertools
import os
import signal
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


_TOKENS = itertools.count()


@pytest.fixture(autouse=True)
def _no_process_outlives_its_slow_test(request):
    """A slow test's processes carry a token; what is left of them after it is ended and named
    (``tests/leftovers.py``): a test that SIGKILLs a viewer must not leave the run going."""
    if request.node.get_closest_marker("slow") is None:
        yield
        return
    import leftovers

    token = f"{os.getpid()}-{next(_TOKENS)}"
    before = os.environ.get(leftovers.TOKEN_ENV)
    os.environ[leftovers.TOKEN_ENV] = token
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(leftovers.TOKEN_ENV, None)
        else:
            os.environ[leftovers.TOKEN_ENV] = before
        left = leftovers.end_left(token)
        if left:  # in the session's warnings summary (which xdist gathers from its workers)
            import warnings

            warnings.warn(f"left running after the test, ended by the suite: {'; '.join(left)}", stacklevel=1)


def pytest_configure(config):
    """The one golden-update rule (tests/golden_files.py) for the TUI's SVG snapshots too:
    ``ACCELCTL_UPDATE_GOLDEN=1`` turns on syrupy's ``--snapshot-update``.  And the suite's
    matmul ceiling (``_calibrate_once``)."""
    from golden_files import updating

    if updating() and hasattr(config.option, "update_snapshots"):
        config.option.update_snapshots = True
    _own_parse_cache(config)
    _own_model_facts_cache(config)
    _calibrate_once(config)


def _own_parse_cache(config) -> None:
    """The session's parsed-workload cache in a folder of its own (``ACCELCTL_PARSE_CACHE``), not
    the user's ``~/.cache/accelctl/parsed``: the suite's thousands of files would push out the
    user's entries (128 kept), and no run of the suite starts from another's entries."""
    from accelctl.dsl.parse_cache import ENV

    if hasattr(config, "workerinput") or os.environ.get(ENV):
        return
    os.environ[ENV] = _session_folder("accelctl-suite-parsed-")


def _own_model_facts_cache(config) -> None:
    """The session's model-facts cache in a folder of its own (``ACCELCTL_MODEL_FACTS_CACHE``):
    the suite never reads the user's entries, and its modules that ask for the same models'
    facts start one subprocess between them."""
    from accelctl.models.meta_facts import ENV

    if hasattr(config, "workerinput") or os.environ.get(ENV):
        return
    os.environ[ENV] = _session_folder("accelctl-suite-model-facts-")


def _session_folder(prefix: str) -> str:
    """A new folder, removed when the session's process ends."""
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _calibrate_once(config) -> None:
    """Measure this machine's matmul ceiling once for the whole session (``accelctl doctor
    --calibrate``, 1 and all threads, 0.3 s a dtype: ~6 s) and give every test's runs that file
    (``ACCELCTL_CALIBRATION_FILE``, which xdist's workers and every process they start inherit).

    Without it each rank of the suite's ~hundreds of real runs probes its own best-of for ~0.3 s
    on every thread it has (``worker/envinfo.add_ceiling``): the biggest fixed cost of a run after
    the libraries' import.  A user who ran ``doctor --calibrate`` runs exactly this way; the tests
    of the per-run probe and of the stored ceiling set their own file (``tests/run/
    test_worker_calibration.py``, ``tests/test_calibration.py``).  Not for a selection without
    the slow tests (``-m "not slow"``: few real runs, and the fast tier stays fast), nor when the
    variable is already set (a developer's own file), nor in xdist's workers (the controller's)."""
    from accelctl.contract.envnames import CALIBRATION_FILE

    if hasattr(config, "workerinput") or os.environ.get(CALIBRATION_FILE) or config.option.collectonly:
        return
    if "not slow" in (config.option.markexpr or ""):
        return
    import subprocess
    import sys

    file = os.path.join(_session_folder("accelctl-suite-calibration-"), "calibration.json")
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "doctor", "--calibrate", "--seconds", "0.3"],
                        env={**os.environ, CALIBRATION_FILE: file}, capture_output=True, text=True, timeout=600)
    if cp.returncode != 0:  # no ceiling: every run probes its own, as on a machine never calibrated
        print(f"conftest: doctor --calibrate failed ({cp.returncode}); runs probe per run\n{cp.stderr[-2000:]}",
              file=sys.stderr)
        return
    os.environ[CALIBRATION_FILE] = file


def _shared_fixtures(item) -> tuple[str, tuple[str, ...]] | None:
    """The suite's own shared fixtures that ``item`` uses: ``("session", (name,))`` for a
    session-scoped one (the Slurm cluster), else ``("module", names)`` of its module- and
    class-scoped ones (a module's shared real runs); None if it uses none."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes: dict[str, list[str]] = {}
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if Path(fixturedef.func.__code__.co_filename).is_relative_to(TESTS):  # ours, not a plug-in's
                scopes.setdefault(fixturedef.scope, []).append(name)
    if "session" in scopes:
        return "session", (scopes["session"][0],)
    names = tuple(dict.fromkeys(scopes.get("module", []) + scopes.get("class", [])))
    return ("module", names) if names else None


def shared_groups(uses: dict[str, tuple[str, tuple[str, ...]] | None]) -> dict[str, str]:
    """The xdist group of each test id that uses a shared fixture (``_shared_fixtures``): a
    session-scoped fixture's name; in a module, the tests whose fixtures overlap, directly or
    through another test, named by the module and those fixtures -- so tests of one module
    that share no fixture (two separate real runs) can run on two workers."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(node):
        while parent.setdefault(node, node) != node:
            node = parent[node]
        return node

    for nodeid, use in uses.items():
        if use is not None and use[0] == "module":
            module = nodeid.split("::")[0]
            for name in use[1]:
                parent[root((module, name))] = root((module, use[1][0]))
    members: dict[tuple[str, str], set[str]] = {}
    for node in list(parent):
        members.setdefault(root(node), set()).add(node[1])
    out = {}
    for nodeid, use in uses.items():
        if use is not None:
            module = nodeid.split("::")[0]
            out[nodeid] = use[1][0] if use[0] == "session" else \
                f"{module}::{'+'.join(sorted(members[root((module, use[1][0]))]))}"
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``-n N --dist loadgroup`` (pytest-xdist), the tests that share an expensive fixture
    run on one worker, so it is set up once: a worker has its own session and modules, and a
    second worker would start its own Slurm cluster or repeat a module's real runs.  Without
    xdist (not installed) no mark is added."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    groups = shared_groups({item.nodeid: _shared_fixtures(item) for item in items})
    for item in items:
        group = groups.get(item.nodeid)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    items[:] = _long_first(items)


#: the longest tests that share no fixture (each its own unit of work under ``--dist
#: loadgroup``), longest first, as measured in CI (``--durations``): started first, so that the
#: last minutes of a run are short tests on both workers, not one long test on one
LONGEST = (
    "tests/language/test_schema_walk.py::test_every_workload_the_walk_plans_runs_without_failing",
    "tests/run/test_sharded_resume.py::",
    "tests/estimate/test_flops.py::test_vit_training_step",
    "tests/dsl/test_fuzz.py::test_fuzz_the_front_end",
    "tests/backends/test_xla_rehearsal.py::test_check_imports_the_workers_names_in_the_installed_torch_xla",
    "tests/backends/test_gaudi_data_files.py::",
    "tests/engines/test_kubernetes.py::test_targets_render_a_pytorchjob_the_sdk_accepts",
    "tests/run/test_store_fuzz.py::",
    "tests/run/test_checkpoint_resume.py::",
    "tests/run/test_ports.py::test_two_deepspeed_runs_at_once_both_finish",
    "tests/worker/test_fsdp_compile.py::",
    "tests/run/test_disk_full.py::",
    "tests/e2e/test_cpu_targets.py::",
    "tests/dsl/test_parse_memory.py::",
    "tests/e2e/test_rehearse_all.py::",
)


def _long_first(items: list) -> list:
    """``items`` with the tests xdist schedules one by one (no xdist group: groups go first,
    largest first, by xdist's own order) ordered longest first: ``LONGEST``, then the other
    slow ones, then the rest, each in collection order.  Grouped tests keep their places."""
    def rank(item) -> int:
        if item.get_closest_marker("xdist_group") is not None:
            return 0
        known = next((i for i, prefix in enumerate(LONGEST) if item.nodeid.startswith(prefix)), None)
        if known is not None:
            return 1 + known
        return 1 + len(LONGEST) + (item.get_closest_marker("slow") is None)

    return sorted(items, key=rank)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """``ACCELCTL_TEST_TIMELINE=DIR``: one line per test (worker, start, end, load, id) in
    ``DIR/<worker>.tsv``, to see where a whole-suite run's time goes (``scripts/timeline.py``)."""
    folder = os.environ.get("ACCELCTL_TEST_TIMELINE")
    if not folder:
        yield
        return
    import time

    start = time.time()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(folder).mkdir(parents=True, exist_ok=True)  # a folder not made yet is made, not a crash of the worker
    with open(Path(folder) / f"{worker}.tsv", "a", encoding="utf-8") as out:
        out.write(f"{worker}\t{start:.2f}\t{time.time():.2f}\t{os.getloadavg()[0]:.1f}\t{item.nodeid}\n")


_DURATIONS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Each test's time (setup + call + teardown), gathered where the summary is printed (under
    xdist: the controller, from its workers' reports)."""
    _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The machine and where the time went, at the end of every run (CI shows its tail): the CPU
    and whether it has native bf16 (a bf16 run is ~180x slower without), the load, the sum of the
    tests' times and the ten longest."""
    if not _DURATIONS:
        return
    from accelctl import hostinfo

    write = terminalreporter.write_line
    terminalreporter.section("where the time went")
    write(f"machine: {hostinfo.cpu_model()}, {os.cpu_count()} cores, native bf16: "
          f"{'yes' if hostinfo.cpu_has_native_bf16() else 'no'}, load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    write(f"{len(_DURATIONS)} tests, {sum(_DURATIONS.values()):.0f} s of test time in all; the longest:")
    for nodeid, seconds in sorted(_DURATIONS.items(), key=lambda kv: -kv[1])[:10]:
        write(f"  {seconds:7.1f} s  {nodeid}")

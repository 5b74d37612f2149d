"""Shared by every test folder: the suite's processes start with SIGINT at its default.

Several tests press Ctrl-C on the CLI (SIGINT to a child process) and expect a stop.  A shell
without job control starts a background command (``cmd &``) with SIGINT ignored; Python then
installs no KeyboardInterrupt handler, and an ignored signal stays ignored across ``exec``, so
every ``accelctl run`` the tests started ignored their Ctrl-C and ran to its end (seen: a suite
started as ``(cmd &)`` failed three such tests, which pass with SIGINT at its default).  Here
pytest's own process gets Python's handler back, and its children start with the default."""

import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
    """The one golden-update rule (tests/golden_files.py) for the TUI's SVG snapshots too:
    ``ACCELCTL_UPDATE_GOLDEN=1`` turns on syrupy's ``--snapshot-update``."""
    from golden_files import updating

    if updating() and hasattr(config.option, "update_snapshots"):
        config.option.update_snapshots = True

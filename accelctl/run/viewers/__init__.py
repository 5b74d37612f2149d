"""What follows a run from any process: ``status``, ``logs`` and ``attach`` (follow), the
console sink and its time left.  Reads the store; starts and signals nothing."""

"""Decisions before renting: which machine (``pick``), which micro-batch (``fit``, confirmed by a
real step in ``fit_probe``) and how a setting or a device count changes the answer (``sweep``,
``sweep_over``).  They ask the planner and the estimate; their tables come from ``accelctl.report``."""

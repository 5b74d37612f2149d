"""Bare baselines: independent scripts that import nothing from accelctl.

Each is the plainest loop a user would write for the same model, batch and threads as the
accelctl workload it is compared with (``bench/workloads``), run as
``python bench/baselines/NAME.py ARGS``; it prints one JSON line with its step times.
"""

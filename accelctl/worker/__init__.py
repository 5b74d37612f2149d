"""The process every launch starts (``python -m accelctl.worker JOB.json``).

Its own package: it reads ``accelctl.contract`` (the job in, events out) and nothing
above it, so what runs on an accelerator host is this package, the contract and the
framework stacks, never the planner.
"""

"""The device check (issue 21, docs/device-runs.md): the seeds' GPU rows measured on one
H100 whenever a GPU machine is lent, prepared and rehearsed here.

``python -m bench.device OUT_DIR`` (started by ``scripts/device-check.sh`` on the GPU machine)
runs ``accelctl estimate`` of every part, then each part as ``accelctl run FILE -t h100`` of a
workload in ``workloads/device/`` (each with its own timeout, inside one wall budget), then
``accelctl estimate --calibrate`` with the recorded runs, and writes ``device-check.json``,
``device-check.md`` and ``device-check.log`` to OUT_DIR (partial results too).
``--dry`` (no GPU, CI): plans and estimates every part, checks the wheel list and renders the
table from the recorded sample (``sample.json``, marked as such).  ``--cpu-smoke``: the same
parts through ``accelctl run --rehearse`` on this CPU (stand-in shapes), so errors of the
harness and the loops show here.

``parts`` what runs and the seeds' figures beside it, ``steps`` the accelctl commands with
their timeouts, ``table`` the JSON and Markdown, ``wheels`` the carried wheels' list.
"""

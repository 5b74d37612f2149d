"""accelctl's bench suite: side-by-side ratios against bare baselines (``python -m bench``).

``harness`` runs A/B pairs and their statistics, ``comparisons`` holds one module per
comparison, ``baselines`` the independent bare scripts, ``workloads`` the workload files
written for the suite, ``readme`` the table of docs/bench.md.  See ``bench/__main__.py``.
"""

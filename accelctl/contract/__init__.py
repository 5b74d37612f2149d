"""The contracts every layer agrees on, importing nothing of accelctl above ``errors``.

``plan``: Plan, Launch, GeneratedFile (what a backend produces, what the runner executes).
``job``: WorkerJob (the worker's only input).  ``events``: the typed events a worker writes
(its only output).  Backends, engines, the runner, the worker, reports and the TUI all
speak these types; none of them imports another to learn a shape.
"""

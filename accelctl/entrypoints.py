"""The modules accelctl starts as processes (``python -m NAME``), named in this one place.

A process boundary is not an import: the layer contracts cannot see it, so every module another
module starts by name is listed here, and tests/test_entrypoints.py resolves each one and finds
no such name spelled anywhere else.  (A module that starts itself uses ``__name__``.)"""

#: the worker: one rank of a run, reading only its job (``accelctl.contract``)
WORKER = "accelctl.worker"
#: the worker's preflight: a seconds-long all-reduce over the planned world in its place
PREFLIGHT = "accelctl.worker.preflight"
#: the per-core calibration ``accelctl doctor`` runs
CALIBRATE = "accelctl.worker.calibrate"
#: a run's supervisor: runs the batch a face checked and planned (``accelctl.run.supervision.batch``)
SUPERVISOR = "accelctl.cli.supervise"
#: an AWS Batch job's command: the node's launch of a multi-node job
BATCH_ENTRYPOINT = "accelctl.engines.batch_entrypoint"
#: a model's facts from its library's module, built on the meta device (``accelctl.models.meta_facts``)
MODEL_FACTS = "accelctl.models.module_facts"

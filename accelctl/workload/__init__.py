"""The checked workload as frozen types (``types``: ``WorkloadSpec`` and its parts) and its
target options (``options``).  Pure data: the plan contract and the worker read it."""

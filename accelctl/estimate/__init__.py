"""``accelctl estimate``: step time, throughput, latency and cost per target, before renting.

From first principles, no torch: ``flops`` counts the arithmetic of a step from the model's
architecture, ``traffic`` the bytes a step moves through device memory and over the links
(ZeRO stage and parallel layout included), ``factors`` holds the achievable fractions of the
datasheet peaks (with provenance), and ``roofline`` combines them into a time per step with
overlap, the resource that bounds it, the memory fit and the cost.  ``render`` prints it.

Layer: above ``accelctl.run`` (``--calibrate`` reads the run store), below ``accelctl.api``.
"""

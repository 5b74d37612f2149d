"""What accelctl knows of model architectures, per family: the catalog of families and known Hub
models (``catalog``), a config's shape (``hf_config``), parameter counts, FLOPs per step
(``flops``), activation memory on each device family (``activations``), parallelize plans and
the FP8 layer rules.  Pure data and arithmetic: the worker reads it too."""

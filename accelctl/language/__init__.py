"""The workload language past the parser: value types (``values``), the key tables (``schema``),
the check pass that turns an AST into a ``WorkloadSpec`` (``check`` and its ``check_*`` parts,
``targets``, ``stack``), ``--set`` / ``--over`` (``settings``, ``over``) and the plug-in table
(``plugins``).  It reads the workload types, the device catalog and the model knowledge below it."""

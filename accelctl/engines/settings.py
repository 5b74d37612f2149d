"""How engines declare their settings (``engine <name> { ... }``), and the value types several share.

Each engine states its settings once, in a small module of its own beside it
(``<engine>_settings.py``: a ``SETTINGS`` table of setting -> value type, and whatever pattern
the engine itself checks again), which its ``Engine`` class exposes as ``settings``.  The
language reads them from there (``accelctl.spec.schema.ENGINE_KEYS``, through
``accelctl.spec.plugins.ENGINE_SETTINGS``: names, like the plug-in table, so the check pass
imports these small modules and never an engine), and so do the docs and completion, which
read the schema.  These modules import nothing but the spec's value types: ``validate`` stays
as light as it was (``tests/engines/test_engine_settings.py`` checks both).
"""

from __future__ import annotations

from accelctl.spec import values as V

#: a container image reference, the pattern the stack's ``image`` also reads
IMAGE = V.IMAGE

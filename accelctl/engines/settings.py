"""How engines declare themselves, and the value types several share.

Each engine states its facts once, in a small module of its own beside it
(``<engine>_settings.py``): a ``ROW`` (``accelctl.language.plugins.EngineRow``) holding its
``SETTINGS`` table (setting -> value type), their meanings, its summary, its refusal code and
where its classes are, with whatever pattern the engine itself checks again.  The language
(``accelctl.language.schema.ENGINE_KEYS``), the docs, completion and the planner read the row
through ``accelctl.language.plugins.ENGINES``, so the check pass imports these small modules and
never an engine.  They import nothing but the spec's value types and the row's class.
"""

from __future__ import annotations

from accelctl.language import values as V

#: a container image reference, the pattern the stack's ``image`` also reads
IMAGE = V.IMAGE

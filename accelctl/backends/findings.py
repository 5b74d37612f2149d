"""A finding of a check against a vendor's real source (``te_check``, ``xla_check``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    #: what was checked: "te_recipe.json: recipe", "te_layers.py:57" ...
    subject: str
    message: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}"

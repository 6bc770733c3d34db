"""The shipped rationale taxonomy: why a negotiation point moved, and how far it generalises.

Spec: insertion-pipeline.md "Extract decisions" ("rationale category (validated against the
taxonomy)"). The taxonomy is package data (``ki/domain/decisions/data/rationale-taxonomy.json``)::

    {"version": "...", "categories": [{"id", "label": {"de", "en"}, "description", "keywords": [...]}],
     "generalizability": [{"id", "description"}]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

RESOURCE = "rationale-taxonomy.json"


@dataclass(frozen=True)
class Taxonomy:
    """Category ids with their keywords, and the generalizability levels."""

    version: str
    categories: dict[str, dict]
    generalizability: tuple[str, ...]

    def is_category(self, value: str) -> bool:
        return value in self.categories

    def is_generalizability(self, value: str) -> bool:
        return value in self.generalizability

    def menu(self) -> dict:
        """The taxonomy as shown to a model.

        Returns: ``{"categories": [{id, label, description}], "generalizability": [ids]}``.
        """
        return {"categories": [{"id": k, "label": v["label"], "description": v["description"]}
                               for k, v in self.categories.items()],
                "generalizability": list(self.generalizability)}


@lru_cache(maxsize=1)
def rationale_taxonomy() -> Taxonomy:
    """The shipped taxonomy (cached)."""
    raw = json.loads(resources.files("ki.domain.decisions").joinpath("data", RESOURCE).read_text(encoding="utf-8"))
    return Taxonomy(version=raw["version"], categories={c["id"]: c for c in raw["categories"]},
                    generalizability=tuple(g["id"] for g in raw["generalizability"]))

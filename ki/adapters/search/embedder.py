"""What an embedder is, and what an index records of one: the names a search needs without loading numpy.

Spec: insertion-pipeline.md "Index" (the model name and dimension are recorded on the index). The embedders
themselves (numpy arrays in, numpy arrays out) are :mod:`ki.adapters.search.embeddings`; this module holds only
the protocol and the identity, so a lexical-only search (the default) never imports numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """What the index stage and search need from an embedding model.

    Attributes:
        name: stable identity recorded on the index (``index_meta.embedder``) and in the cache;
            two embedders with the same name must produce the same vectors.
        dimension: vector length (raises the model's own errors if it must be probed).
    """

    name: str

    @property
    def dimension(self) -> int: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of documents/chunks: float32 ``(len(texts), dimension)``, rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Vector of a search query: float32 ``(dimension,)``, L2-normalised."""
        ...


@dataclass(frozen=True)
class EmbedderIdentity:
    """What an index records about its vectors: ``embedder`` name and ``dimension``."""

    embedder: str
    dimension: int

    def __str__(self) -> str:
        return f"{self.embedder} ({self.dimension}-d)"


def identity_of(embedder: Embedder | None) -> EmbedderIdentity | None:
    """The (name, dimension) of ``embedder``; None for no embedder."""
    return None if embedder is None else EmbedderIdentity(embedder.name, int(embedder.dimension))

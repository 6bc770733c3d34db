"""``python -m ki.index reset-vectors``: drop the search index's vectors and its embedder record.

Use it after changing ``retrieval.embedding_model`` on an index that holds another model's vectors
(the index stage refuses to mix them: :class:`ki.index.backend.EmbedderMismatch`). With
``components.opensearch_url`` set, the OpenSearch index is deleted too (the next index run re-creates it). Then bump
``pipeline.stages.index.rerun_token`` and run ``ki insert`` to re-embed with the new model.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (0 done, 2 usage)."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["reset-vectors"]:
        print("usage: python -m ki.index reset-vectors", file=sys.stderr)
        return 2
    from ki.index.search import backend_for
    from ki.orchestration.context import PipelineContext

    ctx = PipelineContext.open()
    backend = backend_for(ctx.db, ctx.config)
    n = backend.reset_vectors()
    print(f"dropped {n} vectors, the HNSW index, the embedding cache and the index's embedder record"
          + (f"; deleted the OpenSearch index {backend.index}" if backend.name == "opensearch" else ""))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``ki index reset-vectors``: drop the search index's vectors and its embedder record.

Use it after changing ``retrieval.embedding_model`` on an index that holds another model's vectors
(the index stage refuses to mix them: :class:`ki.adapters.search.backend.EmbedderMismatch`). With
``components.opensearch_url`` set, the OpenSearch index is deleted too (the next index run re-creates
it). Then bump ``pipeline.stages.index.rerun_token`` and run ``ki insert`` to re-embed with the new model.
"""

from __future__ import annotations

import typer

from ki.cli.common import open_context, out

group = typer.Typer(no_args_is_help=True, help="The search index")


@group.command("reset-vectors")
def reset_vectors() -> None:
    """Drop every vector, the HNSW index, the embedding cache and the index's embedder record."""
    from ki.adapters.search.factory import backend_for

    ctx = open_context()
    backend = backend_for(ctx.db, ctx.config)
    n = backend.reset_vectors()
    out.print(f"dropped {n} vectors, the HNSW index, the embedding cache and the index's embedder record"
              + (f"; deleted the OpenSearch index {backend.index}" if backend.name == "opensearch" else ""))


def register(app: typer.Typer) -> None:
    """Add ``ki index``."""
    app.add_typer(group, name="index")

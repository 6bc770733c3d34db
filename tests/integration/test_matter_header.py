"""The matter in every passage's vector, each blob's passages still embedded once.

Spec: insertion-pipeline.md "Index" (each chunk embedded with the optional context header naming title, type
and matter); DESIGN.md "Duplicates and permissions" (identical bytes embedded once per blob). Two byte-identical
files filed under two matters: their passages are embedded once, each matter header once, and each copy's
passage vectors lean towards its own matter.
"""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import text

from ki.adapters.search.embeddings import HashingEmbedder
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.stages.index_rows import MATTER_WEIGHT

KELLER = "Mandate/2024-0153 Keller Logistik GmbH gg. Nordwind AG"
SONNE = "Mandate/2024-0208 Sonnenhaus Immobilien GmbH gg. Weserfeld AG"
BODY = ("Vermerk\nDie Parteien haben die Übergabe der Halle besprochen. Der Zählerstand wurde notiert. " * 30)


def test_copies_under_two_matters_embed_their_passages_once_and_lean_to_their_matter(ctx, tmp_path, monkeypatch):
    set_config_value(ctx.settings.data_dir, "retrieval.embedding_model", "hashing:64")
    ctx.reload_config()
    root = tmp_path / "estate"
    for folder in (KELLER, SONNE):
        (root / folder).mkdir(parents=True)
        (root / folder / "Vermerk.txt").write_text(BODY, encoding="utf-8")
    texts: list[str] = []
    real = HashingEmbedder.embed_passages
    monkeypatch.setattr(HashingEmbedder, "embed_passages", lambda self, t: texts.extend(t) or real(self, t))
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30).status == "completed"
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("""SELECT so.external_id, c.ordinal, c.text, c.embedding::text AS emb
                                    FROM chunk c JOIN source_object so ON so.id = c.source_object_id
                                    WHERE c.ordinal >= 0 ORDER BY so.external_id, c.ordinal""")).fetchall()
        matters = dict(conn.execute(text("""SELECT so.external_id, m.reference || ' ' || m.title
                                            FROM matter_assignment ma JOIN matter m ON m.id = ma.matter_id
                                            JOIN source_object so ON so.id = ma.source_object_id""")).fetchall())
    keller, sonne = f"{KELLER}/Vermerk.txt", f"{SONNE}/Vermerk.txt"
    assert matters[keller].startswith("2024-0153") and matters[sonne].startswith("2024-0208")
    passages = [r for r in rows if r.external_id == keller]
    assert len(passages) > 1 and len([r for r in rows if r.external_id == sonne]) == len(passages)
    # every passage input embedded once for both copies; each matter header once
    passage_inputs = [t for t in texts if any(t.endswith(p.text) for p in passages)]
    assert len(passage_inputs) == len(passages) == len(set(passage_inputs))
    assert sorted(t for t in texts if t in matters.values()) == sorted(matters.values())
    emb = HashingEmbedder(64)
    vec = {(r.external_id, r.ordinal): np.array(json.loads(r.emb), dtype=np.float32) for r in rows}
    head = {k: emb.embed_passages([v])[0] for k, v in matters.items()}
    for o in range(len(passages)):
        a, b = vec[(keller, o)], vec[(sonne, o)]
        assert not np.allclose(a, b)
        assert float(a @ head[keller]) > float(b @ head[keller])
        assert float(b @ head[sonne]) > float(a @ head[sonne])
        assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-4
    assert 0 < MATTER_WEIGHT < 1

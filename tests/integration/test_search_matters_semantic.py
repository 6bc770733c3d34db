"""Classify's ``search_matters`` by meaning: vector similarity over the indexed chunks joins the one exact-total
ranking while the index holds vectors; full-text rank otherwise.

Spec: insertion-pipeline.md "Classify: what the model is given" (``search_matters`` "ranks existing matters by
semantic similarity over already-indexed chunks, title substring, and reference-number match"; the whole
candidate set ranked before the page is cut, so ``page.total`` is exact and an offset walks the same ranking).
A real insertion (real PostgreSQL, the local multilingual-e5-small model shipped as a wheel) of four German
matters; the queries are English paraphrases sharing no word with any file.
"""

from __future__ import annotations

from sqlalchemy import text

from ki.adapters.agents.loop import AgentState
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.domain.matters.tools import classify_tools
from ki.stages.classify_matter import query_embedding
from ki.store.matters import SEMANTIC_POINTS, semantic_points

MATTERS = {
    "2024-0153": ("Mandate/2024-0153 Keller Logistik GmbH gg. Nordwind AG", "Schriftsatz.txt",
                  "Die Klägerin verlangt Zahlung des Kaufpreises für gelieferte Ware. Die Beklagte hat die Rechnung "
                  "vom 3. Mai trotz Mahnung nicht beglichen."),
    "2024-0171": ("Mandate/2024-0171 Brandauer Personal", "Vertrag.txt",
                  "Der Arbeitnehmer wird ab dem 1. März als Lagerleiter beschäftigt. Die Probezeit beträgt sechs "
                  "Monate, der Urlaub dreißig Tage im Jahr."),
    "2024-0208": ("Mandate/2024-0208 Sonnenhaus Halle 3", "Vertrag.txt",
                  "Der Vermieter überlässt dem Mieter die Halle 3 zur gewerblichen Nutzung. Die Miete beträgt "
                  "monatlich 4.000 EUR zuzüglich Nebenkosten."),
    "2024-0230": ("Mandate/2024-0230 Projekt Eiderhof", "Vertrag.txt",
                  "Die Käuferin erwirbt sämtliche Geschäftsanteile an der Zielgesellschaft zu einem Kaufpreis von "
                  "zwölf Millionen Euro; der Vollzug setzt die Freigabe des Kartellamts voraus."),
}
#: English paraphrases: no word of a query occurs in any file, folder or matter title.
LAWSUIT = "lawsuit over the unpaid bill for shipped goods"
HIRING = "hiring a warehouse manager"


def _words(value: str) -> set[str]:
    return {w.casefold().strip(".,;") for w in value.split()}


def _search(tool, query: str, **kw):
    return AgentState(tools={tool.name: tool}, trace_id="t").call("search_matters", query=query, **kw)


def test_search_matters_finds_a_matter_by_meaning_with_an_exact_total(ctx, tmp_path):
    root = tmp_path / "estate"
    for folder, name, body in MATTERS.values():
        (root / folder).mkdir(parents=True)
        (root / folder / name).write_text(body + "\n", encoding="utf-8")
    everything = " ".join(" ".join(m) for m in MATTERS.values())
    assert not (_words(LAWSUIT) | _words(HIRING)) & _words(everything)  # a paraphrase, not a word match
    assert query_embedding(ctx.db) is None  # nothing indexed yet: full text only
    set_config_value(ctx.settings.data_dir, "retrieval.embedding_model", "local")
    ctx.reload_config()
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=60).status == "completed"
    with ctx.db.engine.connect() as conn:
        ids = dict(conn.execute(text("SELECT reference, id FROM matter")).fetchall())
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()
        embedded = conn.execute(text("SELECT count(*) FROM chunk WHERE embedding IS NOT NULL")).scalar_one()
    assert sorted(ids) == sorted(MATTERS) and embedded >= 8

    embed = query_embedding(ctx.db)
    assert embed is not None
    semantic = classify_tools(ctx.db, project_id=project, neighbourhood=dict, embed_query=embed)[0]
    found = _search(semantic, LAWSUIT, limit=2)
    top = found["results"][0]
    assert (top["reference"], top["why"]) == ("2024-0153", ["semantic"])
    assert top["score"] == SEMANTIC_POINTS and 0 < top["similarity"] <= 1
    # every matter holds one of the nearest rows: four candidates, the page of two says so, the offset walks on
    assert found["page"] == {"offset": 0, "limit": 2, "total": 4, "has_more": True}
    rest = _search(semantic, LAWSUIT, limit=2, offset=2)
    walked = [r["reference"] for r in found["results"] + rest["results"]]
    assert sorted(walked) == sorted(MATTERS) and rest["page"]["has_more"] is False
    assert [r["score"] for r in found["results"] + rest["results"]] == [round(semantic_points(k), 3)
                                                                         for k in range(1, 5)]
    assert _search(semantic, HIRING)["results"][0]["reference"] == "2024-0171"
    # the reference still wins over meaning, and the words of a title still count
    by_ref = _search(semantic, "2024-0208")["results"][0]
    assert by_ref["reference"] == "2024-0208" and by_ref["why"][0] == "reference"

    lexical = classify_tools(ctx.db, project_id=project, neighbourhood=dict, embed_query=None)[0]
    assert _search(lexical, LAWSUIT) == {"results": [], "page": {"offset": 0, "limit": 8, "total": 0,
                                                                  "has_more": False}}
    words = _search(lexical, "Rechnung Mahnung")
    assert [r["reference"] for r in words["results"]] == ["2024-0153"] and words["results"][0]["why"] == ["text"]
    assert words["page"]["total"] == 1 and "similarity" not in words["results"][0]

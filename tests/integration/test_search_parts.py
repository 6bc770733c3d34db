"""Everything in a file is findable (issue 20 item 1) and phrases of stop words rank the verbatim file first
(item 9): real DOCX files from other projects' test suites (shared/corpus/real, licences in its MANIFEST)
inserted by the pipeline ``ki insert`` runs, then searched through ``ki search`` (the CLI command in process)
and the search API, on both backends (OpenSearch: marker ``opensearch``).

Cost: one insertion of five small files per backend (~10 s embedded).
"""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from ki.adapters.search.factory import backend_for
from ki.adapters.search.search import search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.cli.app import app
from ki.config.loader import set_config_value

FILES = ["tika_testWORD_2006ml.docx", "tika_testComment.docx", "docling_docx_page_header_footer_first_page.docx",
         "tika_footnotes.docx"]


@pytest.fixture(params=["postgres", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def inserted(request, ctx, tmp_path, real_corpus, monkeypatch):
    if request.param == "opensearch":
        node = request.getfixturevalue("opensearch_node")
        monkeypatch.setenv("KI_OPENSEARCH_REFRESH_INTERVAL", "100ms")
        set_config_value(ctx.settings.data_dir, "components.opensearch_url", node.url)
        ctx.reload_config()
        backend_for(ctx.db, ctx.config).drop_index()
    root = tmp_path / "estate"
    root.mkdir()
    for name in FILES:
        shutil.copy(real_corpus / "docx" / name, root / name)
    # a file that holds every word of the phrase, but never in a row (it ranked above the verbatim one)
    (root / "scattered.txt").write_text("Some text is here and there. Here, text is some; is it text? Here is it.\n"
                                        "Text, some, here, is.\n", encoding="utf-8")
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    assert summary.status == "completed", summary.error
    yield ctx
    if request.param == "opensearch":
        backend_for(ctx.db, ctx.config).drop_index()


def _where(ctx, query, **kw):
    hits = search(ctx.db, query, principals=None, operator=True, mode="lexical", config=ctx.config, **kw).hits
    return [(h.path.rsplit("/", 1)[-1], h.part) for h in hits]


@pytest.mark.parametrize(("query", "part"), [
    ("This is a comment", "comment"),
    ("First page header", "header"),
    ("Odd page footer", "footer"),
    ("And this is the footnote", "footnote"),
    ("This is an endnote", "endnote"),
])
def test_every_part_is_found_with_its_kind(inserted, query, part):
    assert _where(inserted, f'"{query}"')[0] == ("tika_testWORD_2006ml.docx", part)


def test_struck_text_is_searchable_marked_and_filterable(inserted):
    assert _where(inserted, '"lazy brown frog"') == [("tika_testWORD_2006ml.docx", "deleted")]
    assert _where(inserted, '"Del r1c1"') == [("tika_testWORD_2006ml.docx", "deleted")]
    assert _where(inserted, '"lazy brown frog"', not_parts=["deleted"]) == []
    assert _where(inserted, "dog", parts=["deleted"]) == []  # "lazy brown dog" is the accepted text


def test_headers_of_other_files_and_footnotes(inserted):
    assert _where(inserted, '"FIRST PAGE FOOTER (page 1 only)"')[0] == (
        "docling_docx_page_header_footer_first_page.docx", "footer")
    assert _where(inserted, '"REGULAR HEADER (page 2 onward)"') == [
        ("docling_docx_page_header_footer_first_page.docx", "header")]
    assert _where(inserted, "snoska") == [("tika_footnotes.docx", "footnote")]


def test_phrase_of_stop_words_ranks_the_verbatim_file_first(inserted):
    for q in ('"Here is some text"', "Here is some text"):
        got = _where(inserted, q)
        assert got[0] == ("tika_testComment.docx", "body"), (q, got)


def test_ki_search_says_where_it_matched(inserted, monkeypatch):
    monkeypatch.setenv("KI_DATA_DIR", str(inserted.settings.data_dir))
    result = CliRunner().invoke(app, ["search", "Here is a comment", "--explain", "--limit", "3"])
    assert result.exit_code == 0, result.output
    assert "in comment" in result.output and "«Here is a comment»" in result.output
    assert "1. word: 'here'" in result.output  # --explain
    as_json = CliRunner().invoke(app, ["search", '"lazy brown frog"', "--json"])
    body = json.loads(as_json.output[as_json.output.index("{"):])
    assert [(h["part"], h["snippet"]) for h in body["hits"]][0][0] == "deleted"

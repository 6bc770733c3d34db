"""``ki search QUERY``: hybrid search over indexed documents (as the local operator unless ``--as``)."""

from __future__ import annotations

import json

import typer

from ki.cli.common import console, open_context, out, plain, shown


def _party_entities(db, party: str | None) -> tuple[int, ...] | None:  # noqa: ANN001 - a ki.store.db.Database
    if party is None:
        return None
    from ki.domain.entities.store import party_filter_ids  # only for --party: a plain search does not load it

    return party_filter_ids(db, party)


def search(
    query: str = typer.Argument(..., help="words, \"phrases\", -excluded"),
    as_principal: list[str] = typer.Option(None, "--as", help="search as this principal (repeat for groups; "
                                           "default: the local operator, all grants)"),
    matter: str = typer.Option(None, "--matter", help="only this matter (reference)"),
    doc_type: str = typer.Option(None, "--type", help="only this document type (ontology node, ancestors match)"),
    since: str = typer.Option(None, "--since", help="only documents dated on or after YYYY-MM-DD"),
    parts: list[str] = typer.Option(None, "--in", help="only these parts (repeat): body, comment, footnote, "
                                    "header, footer, deleted (struck text), fields (file name, title …)"),
    not_parts: list[str] = typer.Option(None, "--not-in", help="never these parts (repeat), e.g. deleted"),
    clauses: bool = typer.Option(False, "--clauses", help="search the clauses of final/executed agreements, "
                                 "grouped by document"),
    clause_type: str = typer.Option(None, "--clause-type", help="only clauses of this clause type (clause-facet "
                                    "node, descendants included); implies --clauses"),
    party: str = typer.Option(None, "--party", help="only documents naming this party (entity names and aliases)"),
    final: bool = typer.Option(False, "--final", help="only final/executed versions"),
    mode: str = typer.Option("hybrid", help="hybrid, lexical or vector"),
    limit: int = typer.Option(10, min=1, max=200),
    offset: int = typer.Option(0, min=0, max=1000, help="skip this many hits (paging)"),
    cursor: str = typer.Option(None, "--cursor", help="the next page: the cursor the previous page printed"),
    explain: bool = typer.Option(False, "--explain", help="show how the query was understood"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Hybrid search (full text with German/Dutch compounds and document fields, and vectors, fused by RRF).

    Plain words: documents with all of them first, then those with most; "a phrase" must match as written;
    -word excludes documents containing it; a or b takes either.
    """
    from datetime import date

    from ki.adapters.search.search import search as run_search

    try:
        since_day = date.fromisoformat(since) if since else None
    except ValueError as exc:
        console.print(f"[red]--since must be a date YYYY-MM-DD, not {since!r}[/]")
        raise typer.Exit(2) from exc
    if mode not in ("hybrid", "lexical", "vector"):
        console.print(f"[red]--mode must be hybrid, lexical or vector, not {mode!r}[/]")
        raise typer.Exit(2)
    ctx = open_context()
    try:
        response = run_search(ctx.db, query, principals=as_principal or None, operator=not as_principal,
                              matter=matter, doc_type=doc_type, since=since_day, parts=parts or None,
                              not_parts=not_parts or (), limit=limit, offset=offset, cursor=cursor, mode=mode,
                              explain=explain, config=ctx.config, clauses=clauses, clause_type=clause_type,
                              party=party, party_entities=_party_entities(ctx.db, party), final=final)
    except ValueError as exc:
        console.print(f"[red]{shown(exc)}[/]", highlight=False)
        raise typer.Exit(2) from exc
    for note in response.notes:
        console.print(f"[yellow]{shown(note)}[/]", highlight=False)
    if as_json:
        out.print_json(json.dumps(response.model_dump(mode="json")))
        return
    if explain and response.explanation:
        out.print("[bold]query:[/]")
        for line in response.explanation:
            out.print(f"  {line}", markup=False, highlight=False)
    if not as_principal:
        console.print("[dim]searching as the local operator (all grants); use --as PRINCIPAL to check access[/]")
    if not response.hits:
        out.print("no results" if not response.offset else "no more results")
    for i, h in enumerate(response.hits, response.offset + 1):
        print_hit(i, h)
    if response.next_cursor:
        out.print(f"[dim]more: --offset {response.next_offset} (or --cursor {shown(response.next_cursor)})[/]")


#: Where a hit's lines (anchor, snippet, copies) start, and where their wrapped lines continue.
HIT_INDENT = 4


def hit_where(h) -> str:
    """Which part or fields a hit matched, for people: ``body``, ``title, file name``, ``struck text
    (tracked deletion)``, or ``the document's fields (by meaning)`` when no field holds a query word."""
    if h.part == "deleted":
        return "struck text (tracked deletion)"
    if h.part == "fields" and not h.matched:
        return "the document's fields (by meaning)"
    return ", ".join(h.matched) or h.part


def print_hit(i: int, h) -> None:
    """One hit: ``N. PATH  (score …; in …; matter …)``, then its anchor, snippet and other copies, each
    indented by :data:`HIT_INDENT` columns with wrapped lines indented the same (under the hit)."""
    import textwrap

    facts = " ".join(f"{k} {v}" for k, v in (("matter", h.matter), ("type", h.doc_type)) if v)
    if h.part == "clause":
        clause = " ".join(x for x in (h.clause_number, h.clause_heading) if x) or "clause"
        facts = f"clause {clause}" + (f" [{h.clause_type}]" if h.clause_type else " [untyped]") + \
            (f"; {facts}" if facts else "")
    out.print(f"{i:>2}. [bold]{shown(h.path)}[/]  (score {h.score:.2f}; in {shown(hit_where(h))}"
              f"{'; ' + shown(facts) if facts else ''})", highlight=False, soft_wrap=True)
    lines = [f"({h.missing}: tombstoned once the deletion is confirmed)"] if h.missing else []
    lines += [f"on «{plain(h.anchor)}»"] if h.anchor else []
    lines.append(plain(h.snippet))
    lines += [f"also at {plain(other)}" for other in h.also_at]
    pad = " " * HIT_INDENT
    for line in lines:
        wrapped = textwrap.wrap(line, width=max(out.width, 40), initial_indent=pad, subsequent_indent=pad,
                                break_long_words=False, break_on_hyphens=False) or [pad]
        for piece in wrapped:
            out.print(piece, markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``ki search``."""
    app.command()(search)

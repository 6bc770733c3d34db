"""``ki search QUERY``: hybrid search over indexed documents (as the local operator unless ``--as``).

When a ``ki serve`` of the same data directory runs, the search is asked of it over its Unix socket
(:func:`ki.app.local_search.ask`): its search path is warm, and this process loads neither the database driver
nor the search package. Without one (or with ``--direct``) this process searches itself
(:func:`ki.app.local_search.answer`). Both paths give the same answer, printed by :func:`render`.
"""

from __future__ import annotations

import json

import typer

from ki.cli.common import console, out, plain, shown


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
    direct: bool = typer.Option(False, "--direct", envvar="KI_SEARCH_DIRECT",
                                help="search in this process, never through a running ki serve"),
) -> None:
    """Hybrid search (full text with German/Dutch compounds and document fields, and vectors, fused by RRF).

    Plain words: documents with all of them first, then those with most; "a phrase" must match as written;
    -word excludes documents containing it; a or b takes either.
    """
    from datetime import date

    from ki.app.local_search import LocalSearch, SearchRefused, ask
    from ki.config.data_dir import data_dir, serve_socket_path

    try:
        if since:
            date.fromisoformat(since)
    except ValueError as exc:
        console.print(f"[red]--since must be a date YYYY-MM-DD, not {since!r}[/]")
        raise typer.Exit(2) from exc
    if mode not in ("hybrid", "lexical", "vector"):
        console.print(f"[red]--mode must be hybrid, lexical or vector, not {mode!r}[/]")
        raise typer.Exit(2)
    request = LocalSearch(query=query, principals=tuple(as_principal or ()), matter=matter, doc_type=doc_type,
                          since=since or None, parts=tuple(parts or ()), not_parts=tuple(not_parts or ()),
                          clauses=clauses, clause_type=clause_type, party=party, final=final, mode=mode,
                          limit=limit, offset=offset, cursor=cursor, explain=explain)
    try:
        answer = None if direct else ask(request, serve_socket_path(data_dir()))
        if answer is None:
            answer = _search_here(request)
    except SearchRefused as exc:
        console.print(f"[red]{shown(exc)}[/]", highlight=False)
        raise typer.Exit(2) from exc
    render(answer, as_json=as_json, explain=explain, operator=not as_principal)


def _search_here(request) -> dict:  # noqa: ANN001 - a ki.app.local_search.LocalSearch
    from ki.app.local_search import answer
    from ki.cli.common import open_context

    return answer(open_context(), request)


def render(answer: dict, *, as_json: bool, explain: bool, operator: bool) -> None:
    """Print a search's answer (the JSON form of :class:`ki.adapters.search.search.SearchResponse`, from this
    process or a server's): its notes on stderr, then ``--json`` as is, or the hits for people (``operator``: say
    that the local operator searched, with all grants)."""
    for note in answer["notes"]:
        console.print(f"[yellow]{shown(note)}[/]", highlight=False)
    if as_json:
        out.print_json(json.dumps(answer))
        return
    if explain and answer.get("explanation"):
        out.print("[bold]query:[/]")
        for line in answer["explanation"]:
            out.print(f"  {line}", markup=False, highlight=False)
    if operator:
        console.print("[dim]searching as the local operator (all grants); use --as PRINCIPAL to check access[/]")
    if not answer["hits"]:
        out.print("no results" if not answer["offset"] else "no more results")
    for i, h in enumerate(answer["hits"], answer["offset"] + 1):
        print_hit(i, h)
    if answer.get("next_cursor"):
        out.print(f"[dim]more: --offset {answer['next_offset']} (or --cursor {shown(answer['next_cursor'])})[/]")


#: Where a hit's lines (anchor, snippet, copies) start, and where their wrapped lines continue.
HIT_INDENT = 4


def hit_where(h: dict) -> str:
    """Which part or fields a hit matched, for people: ``body``, ``title, file name``, ``struck text
    (tracked deletion)``, or ``the document's fields (by meaning)`` when no field holds a query word."""
    if h["part"] == "deleted":
        return "struck text (tracked deletion)"
    if h["part"] == "fields" and not h["matched"]:
        return "the document's fields (by meaning)"
    return ", ".join(h["matched"]) or h["part"]


def print_hit(i: int, h: dict) -> None:
    """One hit (the JSON form of :class:`ki.adapters.search.search.SearchHit`): ``N. PATH  (score …; in …;
    matter …)``, then its anchor, snippet and other copies, each
    indented by :data:`HIT_INDENT` columns with wrapped lines indented the same (under the hit)."""
    import textwrap

    facts = " ".join(f"{k} {v}" for k, v in (("matter", h.get("matter")), ("type", h.get("doc_type"))) if v)
    if h["part"] == "clause":
        clause = " ".join(x for x in (h.get("clause_number"), h.get("clause_heading")) if x) or "clause"
        facts = f"clause {clause}" + (f" [{h['clause_type']}]" if h.get("clause_type") else " [untyped]") + \
            (f"; {facts}" if facts else "")
    out.print(f"{i:>2}. [bold]{shown(h['path'])}[/]  (score {h['score']:.2f}; in {shown(hit_where(h))}"
              f"{'; ' + shown(facts) if facts else ''})", highlight=False, soft_wrap=True)
    lines = [f"({h['missing']}: tombstoned once the deletion is confirmed)"] if h.get("missing") else []
    lines += [f"on «{plain(h['anchor'])}»"] if h.get("anchor") else []
    lines.append(plain(h["snippet"]))
    lines += [f"also at {plain(other)}" for other in h.get("also_at") or ()]
    pad = " " * HIT_INDENT
    for line in lines:
        wrapped = textwrap.wrap(line, width=max(out.width, 40), initial_indent=pad, subsequent_indent=pad,
                                break_long_words=False, break_on_hyphens=False) or [pad]
        for piece in wrapped:
            out.print(piece, markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``ki search``."""
    app.command()(search)

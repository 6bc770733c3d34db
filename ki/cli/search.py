"""``ki search QUERY``: hybrid search over indexed documents (as the local operator unless ``--as``)."""

from __future__ import annotations

import json

import typer

from ki.cli.common import console, open_context, out


def search(
    query: str = typer.Argument(..., help="words, \"phrases\", -excluded"),
    as_principal: list[str] = typer.Option(None, "--as", help="search as this principal (repeat for groups; "
                                           "default: the local operator, all grants)"),
    matter: str = typer.Option(None, "--matter", help="only this matter (reference)"),
    doc_type: str = typer.Option(None, "--type", help="only this document type (ontology node, ancestors match)"),
    since: str = typer.Option(None, "--since", help="only documents dated on or after YYYY-MM-DD"),
    mode: str = typer.Option("hybrid", help="hybrid, lexical or vector"),
    limit: int = typer.Option(10, min=1, max=200),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Hybrid search (German + English full text and vectors, fused by RRF) over indexed documents."""
    from datetime import date

    from ki.index.search import search as run_search

    try:
        since_day = date.fromisoformat(since) if since else None
    except ValueError as exc:
        console.print(f"[red]--since must be a date YYYY-MM-DD, not {since!r}[/]")
        raise typer.Exit(2) from exc
    if mode not in ("hybrid", "lexical", "vector"):
        console.print(f"[red]--mode must be hybrid, lexical or vector, not {mode!r}[/]")
        raise typer.Exit(2)
    ctx = open_context()
    response = run_search(ctx.db, query, principals=as_principal or None, operator=not as_principal,
                          matter=matter, doc_type=doc_type, since=since_day, limit=limit, mode=mode,
                          config=ctx.config)
    for note in response.notes:
        console.print(f"[yellow]{note}[/]")
    if as_json:
        out.print_json(json.dumps([h.model_dump() for h in response.hits]))
        return
    if not as_principal:
        console.print("[dim]searching as the local operator (all grants); use --as PRINCIPAL to check access[/]")
    if not response.hits:
        out.print("no results")
    for i, h in enumerate(response.hits, 1):
        facts = " ".join(f"{k} {v}" for k, v in (("matter", h.matter), ("type", h.doc_type)) if v)
        out.print(f"{i:>2}. [bold]{h.path}[/]  (score {h.score:.3f}{', ' + facts if facts else ''})")
        out.print(f"    {h.snippet}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``ki search``."""
    app.command()(search)

"""``ki token create|list|revoke``: the API's bearer tokens (stored hashed; shown once).

DESIGN.md "The operator surface is one app"; scopes in :mod:`ki.app.scopes`.
"""

from __future__ import annotations

import json
import sys

import typer
from rich.table import Table

from ki.app.scopes import SCOPES
from ki.cli.common import console, open_context, out, shown

group = typer.Typer(no_args_is_help=True, help="API tokens for ki serve (stored hashed)")


def _engine():
    return open_context().db.engine


@group.command("create")
def create(
    name: str = typer.Option(..., "--name", help="who holds it (the audit log's actor)"),
    scope: list[str] = typer.Option(..., "--scope", help=f"repeat for several: {', '.join(SCOPES)}"),
    principal: str = typer.Option(None, "--principal", help="the principal permission-filtered search runs as; "
                                  "it also limits the names the token sees in work items and quarantine. "
                                  "Without one the token is an operator token (every name)"),
    as_json: bool = typer.Option(False, "--json", help='print {"id": ..., "token": "..."}'),
) -> None:
    """Make a token and print it once (it is stored only as a hash)."""
    from ki.app.tokens import create_token

    try:
        row, token = create_token(_engine(), name=name, scopes=scope, principal=principal)
    except ValueError as exc:
        console.print(f"[red]refused:[/] {shown(exc)}", highlight=False)
        raise typer.Exit(2) from exc
    if as_json:
        sys.stdout.write(json.dumps({"id": row.id, "token": token, "operator": row.principal is None}) + "\n")
        return
    out.print(token, markup=False, highlight=False)
    console.print(f"token {row.id} '{shown(row.name)}' with {', '.join(row.scopes)}"
                  + (f" as {row.principal}" if row.principal else "")
                  + ": copy it now, it is not shown again")
    if row.principal is None:
        console.print("this is an operator token: it has no principal, so it sees every file's name in work items, "
                      "failure groups and quarantine (and cannot search); give --principal to limit it to what "
                      "that principal may see", highlight=False)


@group.command("list")
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every token (live and revoked): id, name, scopes, principal, created, last used."""
    from ki.app.tokens import token_json
    from ki.store.tokens import list_tokens

    with _engine().connect() as conn:
        rows = list_tokens(conn)
    if as_json:
        sys.stdout.write(json.dumps([token_json(r) for r in rows]) + "\n")
        return
    if not rows:
        out.print("no tokens; make one with `ki token create --name NAME --scope read:pipeline`")
        return
    table = Table()
    for col in ("id", "name", "token", "scopes", "principal", "created", "last used", "state"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r.id), shown(r.name), r.prefix + "…", " ".join(r.scopes), shown(r.principal or ""),
                      f"{r.created_at:%Y-%m-%d %H:%M}", f"{r.last_used_at:%Y-%m-%d %H:%M}" if r.last_used_at else "",
                      f"revoked {r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "live")
    out.print(table)


@group.command("revoke")
def revoke(token_id: int = typer.Argument(..., help="the id shown by `ki token list`")) -> None:
    """Revoke a token: requests with it fail (401) from now on."""
    from ki.app.tokens import revoke as revoke_token

    try:
        row = revoke_token(_engine(), token_id)
    except LookupError as exc:
        console.print(f"[red]{shown(exc)}[/]", highlight=False)
        raise typer.Exit(2) from exc
    out.print(f"revoked token {row.id} '{shown(row.name)}'", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``ki token``."""
    app.add_typer(group, name="token")

"""``ki work list|show|groups|retry|cancel``: failed work you can find, group and retry in bulk.

The same filters as ``GET /v1/work-items``, written ``NAME=VALUE`` (``status=failed
kind=convert infrastructure=true since=2026-12-01T08:00``): status (pending, runnable, running, done,
failed = quarantined, cancelled), bucket (ki's buckets: failed = awaiting a retry), kind (stage), reason,
error_class, signature, infrastructure (true/false), path_prefix, run_id, since/until (ISO 8601, UTC
unless an offset is given). A bulk retry/cancel shows the count and a sample first; ``--dry-run`` stops
there, ``--yes`` skips the question. The CLI acts as ``cli`` in the audit log.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import typer

from ki.cli.common import console, open_context, out

group = typer.Typer(no_args_is_help=True, help="Find, group, retry and cancel work items (failed work)")

FILTER_NAMES = ("status, bucket, kind, reason, error_class, signature, infrastructure, path_prefix, run_id, since, "
                "until")
FILTERS_HELP = f"filters as NAME=VALUE: {FILTER_NAMES}"
DONE = {"retry": "retried", "cancel": "cancelled"}
_FILTERS = typer.Argument(None, help=FILTERS_HELP, show_default=False)
_JSON = typer.Option(False, "--json", help="print JSON")


def parse_filters(pairs: list[str] | None) -> Any:
    """``NAME=VALUE`` arguments → a :class:`~ki.store.work_items.WorkItemFilter`.

    Raises: typer.BadParameter naming the bad argument."""
    from ki.store.work_items import WorkItemFilter

    values: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in WorkItemFilter.__dataclass_fields__:
            raise typer.BadParameter(f"{pair!r}: expected NAME=VALUE with NAME one of {FILTER_NAMES}")
        try:
            if name == "infrastructure":
                if value.lower() not in ("true", "false"):
                    raise ValueError("true or false")
                values[name] = value.lower() == "true"
            elif name == "run_id":
                values[name] = int(value)
            elif name in ("since", "until"):
                moment = datetime.fromisoformat(value)
                values[name] = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
            else:
                values[name] = value
        except ValueError as exc:
            raise typer.BadParameter(f"{pair!r}: {exc}") from exc
    try:
        return WorkItemFilter(**values)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _print_json(model: Any) -> None:
    out.print_json(model.model_dump_json())


def _error_line(error: dict[str, Any] | None) -> str:
    if not error:
        return ""
    return f"{error.get('class') or error.get('reason') or ''}: {str(error.get('message') or '')[:200]}"


@group.command("list")
def work_list(filters: list[str] = _FILTERS, limit: int = typer.Option(50, min=1, max=500),
              cursor: str = typer.Option(None, help="the next_cursor a previous page printed"),
              as_json: bool = _JSON) -> None:
    """Work items matching the filters, newest first (one page; the next page's cursor is printed)."""
    from ki.app.work_items import list_page

    flt = parse_filters(filters)
    try:
        page = list_page(open_context(), flt, limit=limit, cursor=cursor)
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    if as_json:
        _print_json(page)
        return
    if not page.items:
        out.print("no work items match")
    for item in page.items:
        out.print(f"{item.id}  {item.kind:<17} {item.status:<9} {item.bucket:<11} {item.attempts}/{item.max_attempts}"
                  f"  {item.path}", markup=False, highlight=False)
        if item.last_error and (item.last_error.get("class") or item.status == "cancelled"):
            out.print(f"    {_error_line(item.last_error)}", markup=False, highlight=False)
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}")


@group.command("show")
def work_show(work_item_id: str = typer.Argument(..., help="work_item:<uuid>"), as_json: bool = _JSON) -> None:
    """One work item with its whole attempt history."""
    from ki.app.work_items import detail
    from ki.core.errors import WorkItemRefused
    from ki.store.work_items import parse_work_item_id

    try:
        item = detail(open_context(), parse_work_item_id(work_item_id))
    except (ValueError, WorkItemRefused) as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    if as_json:
        _print_json(item)
        return
    out.print(f"{item.id}\n  {item.kind} of {item.path}\n  status {item.status} (bucket {item.bucket}), attempts "
              f"{item.attempts}/{item.max_attempts}, run {item.run_id}", markup=False, highlight=False)
    if item.last_error:
        out.print(f"  last error {_error_line(item.last_error)}", markup=False, highlight=False)
    for a in item.history:
        who = a.actor or a.worker or ""
        took = f" {a.duration_seconds:.2f} s" if a.duration_seconds is not None else ""
        error = f"  {a.error_class}: {(a.message or '')[:160]}" if a.error_class else ""
        out.print(f"  {a.finished_at:%Y-%m-%d %H:%M:%S}  #{a.attempt} {a.outcome:<11} {who}{took}{error}",
                  markup=False, highlight=False)


@group.command("groups")
def work_groups(filters: list[str] = _FILTERS, as_json: bool = _JSON) -> None:
    """Failing work items per (stage, error signature), largest group first."""
    from ki.app.work_items import groups

    result = groups(open_context(), parse_filters(filters))
    if as_json:
        _print_json(result)
        return
    if not result.groups:
        out.print("no failing work items")
    for g in result.groups:
        kind = "outage" if g.infrastructure else (g.reason or "fault")
        out.print(f"{g.count:>6}  {g.kind:<17} signature={g.signature}  {kind}  {g.error_class}: "
                  f"{(g.message or '')[:160]}\n        e.g. {', '.join(g.sample_paths)}", markup=False, highlight=False,
                  soft_wrap=True)  # one line per group whatever the terminal's width: readable, greppable


def _act(action: str, target: list[str] | None, dry_run: bool, yes: bool, limit: int, run: bool,
         as_json: bool) -> None:
    from ki.core.errors import WorkItemRefused
    from ki.orchestration import work_items as actions
    from ki.store.work_items import parse_work_item_id

    ctx = open_context()
    single = bool(target) and len(target) == 1 and "=" not in target[0]
    try:
        if single:
            if dry_run:
                console.print("--dry-run applies to a filter; a single item is shown by `ki work show`")
                raise typer.Exit(2)
            do = actions.retry_work_item if action == "retry" else actions.cancel_work_item
            result: Any = do(ctx, parse_work_item_id(target[0]), actor="cli")
            acted = 1
        else:
            flt = parse_filters(target)
            preview = actions.preview_bulk(ctx, action, flt, actor="cli", limit=limit,  # type: ignore[arg-type]
                                           all_items=not target)
            if dry_run or preview.count == 0:
                if as_json:
                    _print_json(preview)
                else:
                    more = f" (at most {limit} in one call)" if preview.count > limit else ""
                    out.print(f"{preview.count} work items would be {DONE[action]}{more}; e.g.\n  "
                              + "\n  ".join(preview.sample), markup=False, highlight=False)
                return
            if not yes and not typer.confirm(f"{action} {min(preview.count, limit)} of {preview.count} work items "
                                             f"matching {json.dumps(preview.filter)}?"):
                raise typer.Exit(1)
            result = actions.run_bulk(ctx, action, flt, actor="cli", token=preview.confirmation_token,  # type: ignore[arg-type]
                                      limit=limit, all_items=not target)
            acted = result.acted
    except (ValueError, WorkItemRefused) as exc:
        console.print(f"[red]{getattr(exc, 'message', exc)}[/]")
        raise typer.Exit(2) from exc
    if as_json:
        _print_json(result)
    else:
        out.print(f"{result.id}: {result.message}" if single else result.message, markup=False, highlight=False)
    if action == "retry" and run and acted:
        from ki.app.launch import launch_insertion

        summary = launch_insertion(ctx, trigger="work_item_retry")
        console.print(f"run {summary.run_id} {summary.status}: {summary.counters.quarantined} quarantined")


@group.command("retry")
def work_retry(target: list[str] = typer.Argument(None, help=f"work_item:<uuid>, or {FILTERS_HELP}",
                                                  show_default=False),
               dry_run: bool = typer.Option(False, "--dry-run", help="show the count and a sample; change nothing"),
               yes: bool = typer.Option(False, "--yes", "-y", help="do not ask before a bulk retry"),
               limit: int = typer.Option(1000, min=1, max=10_000, help="items one call retries at most"),
               run: bool = typer.Option(True, help="run the pipeline afterwards"), as_json: bool = _JSON) -> None:
    """Retry one failed or cancelled item, or every one matching the filters (fresh attempt budget)."""
    _act("retry", target, dry_run, yes, limit, run, as_json)


@group.command("cancel")
def work_cancel(target: list[str] = typer.Argument(None, help=f"work_item:<uuid>, or {FILTERS_HELP}",
                                                   show_default=False),
                dry_run: bool = typer.Option(False, "--dry-run", help="show the count and a sample; change nothing"),
                yes: bool = typer.Option(False, "--yes", "-y", help="do not ask before a bulk cancel"),
                limit: int = typer.Option(1000, min=1, max=10_000, help="items one call cancels at most"),
                as_json: bool = _JSON) -> None:
    """Cancel one item, or every not-running unfinished one matching the filters (retry brings it back)."""
    _act("cancel", target, dry_run, yes, limit, False, as_json)


def register(app: typer.Typer) -> None:
    """Add ``ki work``."""
    app.add_typer(group, name="work")

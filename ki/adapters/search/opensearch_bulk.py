"""Bulk sync to OpenSearch: byte-capped batches, every item result read, faults classified.

Spec: insertion-pipeline.md "Index" (an OpenSearch bulk sync; re-indexing diffs by ordinal: replaced,
never orphaned, never deleted before the new rows are written); notes/opensearch.md §4 (bulk rules)
and §5 (the public failures each rule answers).

What one :func:`sync_documents` call does:

1. Sends every row of every document as an ``index`` action (ids ``<object>-<ordinal>``, so a retry
   or a re-index overwrites in place) through ``opensearchpy.helpers.streaming_bulk`` with
   ``raise_on_error=False`` (every item result is read), ``max_chunk_bytes`` = the byte cap, and
   the helper's own bounded exponential backoff for 429 (whole request or item:
   ``max_retries``, ``initial_backoff`` seconds doubling up to ``max_backoff``). The sync's last bulk
   request carries ``refresh=wait_for`` (read-your-writes: a finished index stage is searchable; a
   sync of more than ``chunk_size`` rows sends its last row alone for that, the others unrefreshed).
2. A whole-request 413 (request too large) halves the byte cap and resends what was not yet
   answered; a single row refused with 413 on its own fails its document only.
3. An index block (``cluster_block_exception``: read-only / flood stage) stops at once with
   :class:`IndexReadOnly` (no blind retry: it will not clear by itself).
4. Rows refused for their content (400 ``mapper_parsing_exception``, strict mapping, dimension
   mismatch, version conflicts) fail exactly their document (:class:`DocumentRejected` via
   :meth:`SyncReport.raise_for`); 429 still refused after the retries, 5xx and missing statuses fail
   their document as an outage (:class:`~ki.core.errors.InfrastructureError`).
5. For the documents whose every row was written, the rows of earlier writes (another
   ``generation``) are deleted with one ``_delete_by_query`` — only after the new rows are in (and
   visible: the search behind the delete sees them). The delete is not force-refreshed: until the
   next refresh a search may still meet a surplus row, which the record's check drops (the row is no
   longer in ``chunk``) and deletes again.

Errors outside items (connection refused, timeouts, 5xx after the transport's retries, 429 exhausted
on the whole request) become :class:`~ki.core.errors.InfrastructureError` (:func:`classify_transport_error`),
which :func:`ki.core.retry.classify_error` treats as an infrastructure fault (never quarantined).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ki.core.errors import ConfigurationError, InfrastructureError, KiError, OpenSearchUnavailable, RetryableStageError

#: Default cap of one bulk request body (serialized NDJSON bytes). Hosted clusters refuse > 10 MiB.
DEFAULT_MAX_BATCH_BYTES = 5 * 2**20
#: Actions per bulk request at most (the byte cap usually bites first: a 384-d row is ~8 KB).
DEFAULT_CHUNK_SIZE = 1000


class IndexReadOnly(InfrastructureError):
    """The index refuses writes (``cluster_block_exception``: ``index.blocks.read_only_allow_delete``,
    the disk flood stage or a closed index). An infrastructure fault: the stage is retried later and
    never quarantined, but nothing is retried blindly meanwhile; an operator must free disk space
    and clear the block."""

    def __init__(self, index: str, detail: str):
        super().__init__(
            f"OpenSearch index {index!r} is read-only ({detail}); nothing was written. Free disk space on the "
            f"node, then clear the block: PUT {index}/_settings "
            '{"index.blocks.read_only_allow_delete": null}',
            infrastructure=f"OpenSearch index {index} read-only")
        self.index = index


class DocumentRejected(RetryableStageError):
    """OpenSearch refused rows of one document for their content (e.g. 400 ``mapper_parsing_exception``).

    Retried up to ``max_attempts`` like any stage failure, then quarantined; other documents of the
    same bulk request are unaffected. Attributes: ``source_object_id``, ``failures`` (ItemFailure list).
    """

    def __init__(self, source_object_id: int, failures: Sequence[ItemFailure]):
        first = failures[0]
        super().__init__(f"OpenSearch refused {len(failures)} row(s) of object {source_object_id}: "
                         f"HTTP {first.status} {first.type}: {first.reason}")
        self.source_object_id = source_object_id
        self.failures = list(failures)
        self.details = {"opensearch_items": [f.as_dict() for f in failures[:5]]}


@dataclass(frozen=True)
class BulkOptions:
    """Tuning of bulk writes (internal: never a user-visible limit).

    Attributes:
        max_batch_bytes: cap of one request body in bytes (halved on a 413).
        chunk_size: actions per request at most.
        max_retries: resends of 429-refused items or requests (the helper's own backoff).
        initial_backoff / max_backoff: seconds before the first resend, doubled each time up to the max.
    """

    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    chunk_size: int = DEFAULT_CHUNK_SIZE
    max_retries: int = 4
    initial_backoff: float = 0.5
    max_backoff: float = 8.0


@dataclass(frozen=True)
class ItemFailure:
    """One refused action: its ``id``, HTTP ``status`` (0 when the item had none), error ``type`` and ``reason``.

    ``kind``: ``read_only`` (index block), ``outage`` (429 after retries, 5xx, no status) or
    ``rejected`` (the row's content: 4xx).
    """

    id: str
    status: int
    type: str
    reason: str

    @property
    def kind(self) -> str:
        if self.type == "cluster_block_exception":
            return "read_only"
        if self.status == 0 or self.status == 429 or self.status >= 500:
            return "outage"
        return "rejected"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "type": self.type, "reason": self.reason[:300]}


def item_failure(item: dict[str, Any]) -> ItemFailure:
    """An :class:`ItemFailure` from one bulk response item (the value under ``index``/``create``/
    ``update``/``delete``), whatever shape its ``error`` has (dict, string, missing; no ``status``)."""
    error = item.get("error")
    if isinstance(error, dict):
        etype, reason = str(error.get("type", "unknown")), str(error.get("reason", ""))
        caused = error.get("caused_by")
        if isinstance(caused, dict) and caused.get("reason"):
            reason = f"{reason} (caused by {caused.get('type')}: {caused.get('reason')})"
    else:
        etype, reason = "error", str(error or "no error detail")
    status = item.get("status")
    return ItemFailure(str(item.get("_id", "")), int(status) if isinstance(status, int) else 0, etype, reason)


def _error_type(exc: Any) -> str:
    info = getattr(exc, "info", None)
    if isinstance(info, dict):
        err = info.get("error")
        if isinstance(err, dict):
            return str(err.get("type", ""))
    return ""


def classify_transport_error(exc: BaseException, *, index: str, what: str) -> KiError:
    """Map an opensearch-py exception of a whole request to ki's error classes.

    Returns (for the caller to raise): the ConfigurationError of a connection the address guard refused
    (:class:`ki.adapters.search.opensearch_transport.GuardedConnection`); IndexReadOnly for ``cluster_block_exception``;
    OpenSearchUnavailable (an InfrastructureError) for connection errors, timeouts, 408/429/5xx and other
    transport failures (the breaker's ``opensearch`` faults, :mod:`ki.adapters.breaker`); RetryableStageError for
    other statuses (a request ki built wrongly is no outage, but it is not the file's fault either).
    """
    from opensearchpy.exceptions import ConnectionError as OSConnectionError
    from opensearchpy.exceptions import TransportError

    if isinstance(getattr(exc, "info", None), ConfigurationError):  # a connection the address guard refused
        return exc.info
    if _error_type(exc) == "cluster_block_exception":
        return IndexReadOnly(index, str(exc)[:300])
    if isinstance(exc, OSConnectionError):  # includes ConnectionTimeout
        return OpenSearchUnavailable(f"OpenSearch unreachable during {what}: {exc}",
                                     infrastructure=f"OpenSearch unreachable ({type(exc).__name__})")
    if isinstance(exc, TransportError):
        status = exc.status_code
        if not isinstance(status, int) or status in (408, 429) or status >= 500:
            return OpenSearchUnavailable(f"OpenSearch answered HTTP {status} during {what}: {str(exc)[:300]}",
                                         infrastructure=f"OpenSearch answered HTTP {status}")
        return RetryableStageError(f"OpenSearch refused {what} with HTTP {status}: {str(exc)[:500]}")
    return OpenSearchUnavailable(f"OpenSearch failed during {what}: {exc!r}", infrastructure="OpenSearch error")


class _BlockGuard:
    """The client as ``streaming_bulk`` sees it: a bulk response holding an index-block item raises
    :class:`IndexReadOnly` at once (the helper would otherwise resend those 429 items with backoff)."""

    def __init__(self, client: Any, index: str):
        self._client = client
        self._index = index
        self.transport = client.transport
        self.requests = 0

    def bulk(self, *args: Any, **kwargs: Any) -> Any:
        self.requests += 1
        resp = self._client.bulk(*args, **kwargs)
        if resp.get("errors"):
            for entry in resp.get("items", []):
                for item in entry.values():
                    failure = item_failure(item) if "error" in item else None
                    if failure is not None and failure.kind == "read_only":
                        raise IndexReadOnly(self._index, failure.reason[:300])
        return resp


def _size(serializer: Any, action: dict[str, Any]) -> int:
    meta = {k: v for k, v in action.items() if k != "_source"}
    return len(serializer.dumps(meta)) + len(serializer.dumps(action.get("_source", {}))) + 2


@dataclass
class BulkResult:
    """Per-id outcome of :func:`bulk_execute`: ``ok`` ids, ``failed`` id → ItemFailure, ``requests`` sent."""

    ok: set[str] = field(default_factory=set)
    failed: dict[str, ItemFailure] = field(default_factory=dict)
    requests: int = 0
    splits: int = 0


def bulk_execute(client: Any, actions: Sequence[dict[str, Any]], *, index: str, options: BulkOptions,
                 refresh: str | bool = "wait_for") -> BulkResult:
    """Send ``actions`` (helpers-style dicts with ``_op_type``, ``_index``, ``_id``, ``_source``) and
    read every item's result (see the module docstring for batching, 413 splits and 429 retries).

    Raises: IndexReadOnly; InfrastructureError (connection, 5xx, 429 exhausted on a whole request).
    """
    from opensearchpy import helpers
    from opensearchpy.exceptions import OpenSearchException, TransportError

    guard = _BlockGuard(client, index)
    result = BulkResult()
    pending = list(actions)
    max_bytes = options.max_batch_bytes
    serializer = client.transport.serializer
    while pending:
        try:
            for ok, info in helpers.streaming_bulk(
                    guard, pending, chunk_size=options.chunk_size, max_chunk_bytes=max_bytes,
                    raise_on_error=False, raise_on_exception=True, max_retries=options.max_retries,
                    initial_backoff=options.initial_backoff, max_backoff=options.max_backoff, refresh=refresh):
                item = next(iter(info.values()))
                if ok:
                    result.ok.add(str(item.get("_id")))
                else:
                    failure = item_failure(item)
                    result.failed[failure.id] = failure
            pending = []
        except TransportError as exc:
            if exc.status_code != 413:
                raise classify_transport_error(exc, index=index, what="a bulk write") from exc
            answered = result.ok | result.failed.keys()
            pending = [a for a in pending if str(a["_id"]) not in answered]
            if not pending:
                break
            first = _size(serializer, pending[0])
            if len(pending) == 1 or max_bytes < first + _size(serializer, pending[1]):
                # the refused request held this one row alone: it is too large by itself
                pid = str(pending[0]["_id"])
                result.failed[pid] = ItemFailure(pid, 413, "request_entity_too_large",
                                                 f"a single row of {first} bytes exceeds the node's request limit")
                pending = pending[1:]
            else:
                max_bytes = max(1, max_bytes // 2)
                result.splits += 1
        except OpenSearchException as exc:  # e.g. a serialization error outside any HTTP status
            raise classify_transport_error(exc, index=index, what="a bulk write") from exc
    result.requests = guard.requests
    return result


@dataclass
class SyncReport:
    """What :func:`sync_documents` did per document: ``written`` object ids (every row in, surplus
    removed), ``failed`` object id → its ItemFailures; ``rows`` written; ``surplus_deleted`` rows."""

    written: set[int] = field(default_factory=set)
    failed: dict[int, list[ItemFailure]] = field(default_factory=dict)
    rows: int = 0
    surplus_deleted: int = 0
    requests: int = 0
    splits: int = 0

    def merge(self, other: SyncReport) -> SyncReport:
        """This report and ``other`` (a sync of other documents) as one."""
        return SyncReport(self.written | other.written, self.failed | other.failed, self.rows + other.rows,
                          self.surplus_deleted + other.surplus_deleted, self.requests + other.requests,
                          self.splits + other.splits)

    def raise_for(self, source_object_id: int, *, index: str) -> None:
        """Raise the document's failure: IndexReadOnly, InfrastructureError (outage) or DocumentRejected."""
        failures = self.failed.get(source_object_id)
        if not failures:
            return
        kinds = {f.kind for f in failures}
        if "read_only" in kinds:
            raise IndexReadOnly(index, failures[0].reason[:300])
        if "outage" in kinds:
            f = next(f for f in failures if f.kind == "outage")
            raise InfrastructureError(
                f"OpenSearch did not take {len(failures)} row(s) of object {source_object_id}: HTTP {f.status} "
                f"{f.type}: {f.reason[:300]}", infrastructure=f"OpenSearch answered HTTP {f.status} ({f.type})")
        raise DocumentRejected(source_object_id, failures)


def sync_documents(client: Any, index: str, documents: Sequence[tuple[int, Sequence[dict[str, Any]]]], *,
                   generation: str, options: BulkOptions | None = None, elsewhere: Sequence[str] = (),
                   refresh: bool = True) -> SyncReport:
    """Write each document's row actions, then delete its rows of other generations.

    Args:
        documents: (source object id, its ``index`` actions; every ``_source`` carries ``generation``).
        generation: the token this sync stamps on its rows; rows of a written document without it are surplus.
        elsewhere: other indexes whose rows of the written documents are surplus too (in the same delete:
            a document that moved to ``index`` leaves them).
        refresh: the last request waits for the next refresh (``refresh=wait_for``: the rows are searchable when
            this returns); False for a bulk load with refreshes off (a ``wait_for`` would wait for a refresh that
            never comes): the rows become searchable at the load's closing refresh.
    Returns: a SyncReport (documents whose rows were partly refused keep their old rows: nothing deleted).
    Raises: IndexReadOnly / InfrastructureError for faults of the whole request (nothing can be told per document).
    """
    options = options or BulkOptions()
    owner: dict[str, int] = {}
    actions: list[dict[str, Any]] = []
    for oid, rows in documents:
        for a in rows:
            owner[str(a["_id"])] = oid
            actions.append(a)
    if not refresh:
        result = bulk_execute(client, actions, index=index, options=options, refresh=False)
    elif len(actions) > options.chunk_size:
        # several requests: only the last one waits for the refresh (which makes all of them visible)
        result = bulk_execute(client, actions[:-1], index=index, options=options, refresh=False)
        tail = bulk_execute(client, actions[-1:], index=index, options=options, refresh="wait_for")
        result.ok |= tail.ok
        result.failed |= tail.failed
        result.requests += tail.requests
        result.splits += tail.splits
    else:
        result = bulk_execute(client, actions, index=index, options=options)
    report = SyncReport(requests=result.requests, splits=result.splits, rows=len(result.ok))
    for aid, failure in result.failed.items():
        report.failed.setdefault(owner[aid], []).append(failure)
    report.written = {oid for oid, _ in documents if oid not in report.failed}
    if report.written:
        report.surplus_deleted = delete_by_query(client, ",".join([index, *elsewhere]), {"bool": {
            "filter": [{"terms": {"source_object_id": sorted(report.written)}}],
            "must_not": [{"term": {"generation": generation}}]}}, what="the surplus-row delete", refresh=False)
    return report


def delete_by_query(client: Any, index: str, query: dict[str, Any], *, what: str, refresh: bool = True) -> int:
    """``_delete_by_query`` with its failures read (``index``: one name or several, comma-separated; a missing
    one is skipped). Returns rows deleted.

    Raises: IndexReadOnly / InfrastructureError (request or per-row failures).
    """
    from opensearchpy.exceptions import OpenSearchException

    try:
        resp = client.delete_by_query(index=index, body={"query": query}, refresh=refresh, conflicts="proceed",
                                      ignore_unavailable=True)
    except OpenSearchException as exc:
        raise classify_transport_error(exc, index=index, what=what) from exc
    _raise_failures(resp, index=index, what=what)
    return int(resp.get("deleted", 0))


def _raise_failures(resp: dict[str, Any], *, index: str, what: str) -> None:
    """Raise for the ``failures`` of a by-query response (index block → IndexReadOnly, else an outage)."""
    failures = resp.get("failures") or []
    if not failures:
        return
    text = json.dumps(failures[:3])[:500]
    if "cluster_block_exception" in text:
        raise IndexReadOnly(index, text)
    raise InfrastructureError(f"{what} on OpenSearch index {index!r} failed for {len(failures)} row(s): {text}",
                              infrastructure=f"OpenSearch {what} failed")
